package daemon

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// StopSignals stop logistd gracefully, each alike: TERM (systemd's stop),
// INT (Ctrl-C) and HUP (its terminal or session gone; logistd has no
// configuration to reload, and HUP's default, dying at once, left no
// clean-stop marker). A second one during the grace period stops waiting
// for the calls in flight: they are stopped as when the grace period is
// over.
var StopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}

// Signalled is the cause of a context a stop signal ended.
type Signalled struct{ Signal os.Signal }

func (s Signalled) Error() string { return "signal " + signalName(s.Signal) }

// signalName is a stop signal's name as kill(1) and systemd write it.
func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return s.String()
}

// SignalContext is logistd's context: the first stop signal ends it (its
// cause, Signalled, names the signal), a second one hurries the shutdown
// (hurried). stop releases the signals.
func SignalContext(parent context.Context) (ctx context.Context, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, StopSignals...)
	ctx, cancel := stopOn(parent, sigs)
	return ctx, func() { signal.Stop(sigs); cancel() }
}

type hurryKey struct{}

// stopOn ends ctx at the first value of sigs and closes its hurry channel
// at the second; cancel ends both waits.
func stopOn(parent context.Context, sigs <-chan os.Signal) (context.Context, func()) {
	hurry := make(chan struct{})
	released := make(chan struct{})
	ctx, cancel := context.WithCancelCause(context.WithValue(parent, hurryKey{}, (<-chan struct{})(hurry)))
	go func() {
		select {
		case s := <-sigs:
			cancel(Signalled{s})
		case <-ctx.Done():
		case <-released:
			return
		}
		select {
		case <-sigs:
			close(hurry)
		case <-released:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() { close(released) })
		cancel(context.Canceled)
	}
}

// hurried is closed when the process asks, again, to stop now (nil: it
// never is).
func hurried(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(hurryKey{}).(<-chan struct{})
	return ch
}

// stopCause is how ctx ended, for the shutdown's log line: the signal's
// name, or "" when it was not a signal.
func stopCause(ctx context.Context) string {
	var s Signalled
	if errors.As(context.Cause(ctx), &s) {
		return signalName(s.Signal)
	}
	return ""
}
