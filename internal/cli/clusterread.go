package cli

import (
	"context"
	"os"
	"strings"
	"sync"

	"github.com/logist/logist/internal/cluster"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/steward"
)

// Reading commands in cluster mode: the file form runs, as it is, on the
// jobs it reads written in folder form from the database into a temporary
// folder (cluster.Mirror, with the nodes' and stewards' keys); a command
// that follows (logs -f, watch) reads a folder the mirror keeps up to the
// database while it runs: at once on the database's notice of a change,
// polling slowly besides (cluster.FollowEvery).

// clusterRead is the cluster form of a reading command whose file form is
// run; jobsOf names the jobs it reads (nil: every job), follows whether
// it follows them.
func clusterRead(run func(*env, []string) (*Result, error), jobsOf func([]string) ([]string, error), follows func(*env) bool) func(*env, clusterstore.Store, []string) (*Result, error) {
	return clusterReadAlso(run, jobsOf, follows, nil)
}

// clusterReadAlso is clusterRead whose folder holds, besides the
// objects of each job's current checkpoint, those of the points also
// names for the command (cluster.Mirror.Also; nil: none).
func clusterReadAlso(run func(*env, []string) (*Result, error), jobsOf func([]string) ([]string, error), follows func(*env) bool, also func(*env) func(cp string) bool) func(*env, clusterstore.Store, []string) (*Result, error) {
	return func(e *env, s clusterstore.Store, args []string) (*Result, error) {
		ids, err := jobsOf(args)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if _, err := oneJob([]string{id}); err != nil {
				return nil, err
			}
		}
		tmp, err := os.MkdirTemp("", "logist-read-")
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(tmp) }()
		m := &cluster.Mirror{Store: s, Dir: tmp, Jobs: ids}
		if also != nil {
			m.Also = also(e)
		}
		if err := m.Sync(e.ctx); err != nil {
			return nil, err
		}
		ce := *e
		ce.store, ce.cluster = jobstore.New(tmp), true
		if follows == nil || !follows(e) {
			return run(&ce, args)
		}
		ctx, cancel := context.WithCancel(e.ctx)
		var wg sync.WaitGroup
		wg.Go(func() { _ = m.Follow(ctx, cluster.FollowEvery(s)) })
		defer wg.Wait()
		defer cancel()
		return run(&ce, args)
	}
}

func oneID(args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, usagef("expected a JOB argument")
	}
	return args[:1], nil
}

func init() {
	cmdHistory.cluster = clusterRead(cmdHistory.run, oneID, nil)
	cmdResult.cluster = clusterRead(cmdResult.run, oneID, nil)
	cmdLogs.cluster = clusterRead(cmdLogs.run, oneID, func(e *env) bool {
		f, _ := e.fs.GetBool("follow")
		return f
	})
	cmdWatch.cluster = clusterRead(cmdWatch.run, func(args []string) ([]string, error) {
		if len(args) == 1 {
			return args, nil
		}
		return nil, nil
	}, func(e *env) bool {
		once, _ := e.fs.GetBool("once")
		return !once
	})
	// diff and the checkpoints of completion read the listings of the
	// job's snapshots, which the mirror writes from the database (a git
	// workspace's diff needs its repository, which does not move).
	cmdDiff.cluster = clusterRead(cmdDiff.run, oneID, nil)
	cmdCheckpoints.cluster = clusterRead(cmdCheckpoints.run, oneID, nil)
	// discarded lists from the records; the snapshot a rollback kept of
	// the work it discarded is a point of the job's in the database (the
	// steering stored it), whose listing every folder gets and whose
	// objects --into reads.
	cmdDiscarded.cluster = clusterReadAlso(cmdDiscarded.run, oneID, nil, func(e *env) func(string) bool {
		if into, _ := e.fs.GetString("into"); into == "" {
			return nil
		}
		return func(cp string) bool { return strings.HasPrefix(cp, steward.DiscardedPrefix) }
	})
	cmdJobs.cluster = clusterJobs
	// validate reads the files it is given, never a job; completion
	// prints a script (whose job ids come from __jobs).
	cmdValidate.cluster = func(e *env, _ clusterstore.Store, args []string) (*Result, error) { return cmdValidate.run(e, args) }
	cmdCompletion.cluster = func(e *env, _ clusterstore.Store, args []string) (*Result, error) { return cmdCompletion.run(e, args) }
	cmdSchedules.cluster = func(e *env, s clusterstore.Store, args []string) (*Result, error) {
		if len(args) == 0 {
			return clusterRead(cmdSchedules.run, func([]string) ([]string, error) { return nil, nil }, nil)(e, s, args)
		}
		return clusterSteer(cmdSchedules.run, func(args []string) (string, error) {
			if len(args) != 2 {
				return "", usagef("schedules %s takes one NAME (a schedule's job id)", args[0])
			}
			return args[1], nil
		})(e, s, args)
	}
}

// clusterJobs is __jobs on the database's rows: the ids, only those the
// command --for names can act on now (canTake, on the stored manifest).
func clusterJobs(e *env, s clusterstore.Store, _ []string) (*Result, error) {
	forCmd, _ := e.fs.GetString("for")
	js, err := s.Jobs(e.ctx)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	ids := []string{}
	for _, j := range js {
		m, err := manifest.Decode(j.ID, j.Manifest)
		if err != nil || !canTake(forCmd, m) {
			continue
		}
		ids = append(ids, j.ID)
		b.WriteString(j.ID + "\n")
	}
	return &Result{Text: b.String(), Items: ids}, nil
}
