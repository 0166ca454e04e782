// Command attacker is the hostile agent of the sandbox's escape tests: run
// as an agent, it tries everything issue 19 lists and prints one JSON line
// per attempt. The test decides what counts as an escape, mostly from the
// host's side (files changed, connections accepted, processes left).
//
// Roles (LOGIST_ATTACK_ROLE): "attacker" (default) runs the attacks;
// "survivor" sleeps (started in a new session, double-forked, it must
// still die with the call); "forker" starts a survivor and exits (the
// middle of a double fork); "daemon" stands in for logistd (secrets in its
// environment, non-dumpable, records the signals it gets); "sleeper"
// starts survivors and then waits to be killed; "cat" prints a file;
// "dial" talks to the proxy at the address it is given.
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/logist/logist/internal/sandbox"
)

// config is what the test tells the attacker about the layout it attacks
// (an attacker could guess all of it: the job's folder is the workspace's
// parent).
type config struct {
	Workspace   string `json:"workspace"`
	JobDir      string `json:"job_dir"`
	JobsDir     string `json:"jobs_dir"`
	OtherJob    string `json:"other_job"`
	CallDir     string `json:"call_dir"`
	DaemonHome  string `json:"daemon_home"`
	RealHome    string `json:"real_home"`
	HostTmp     string `json:"host_tmp"`
	DaemonPid   int    `json:"daemon_pid"`
	TCPAddr     string `json:"tcp_addr"`
	UDPAddr     string `json:"udp_addr"`
	UnixSocket  string `json:"unix_socket"`
	Marker      string `json:"marker"` // written by every write attempt, and named in survivors' argv
	Processes   int    `json:"processes"`
	MemoryBytes int64  `json:"memory_bytes"`
	FileBytes   int64  `json:"file_bytes"`
	TmpBytes    int64  `json:"tmp_bytes"`
}

type result struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"` // the forbidden thing worked, as far as the attacker can tell
	Detail string `json:"detail,omitempty"`
	Data   string `json:"data,omitempty"` // what it read
}

func main() {
	switch os.Getenv("LOGIST_ATTACK_ROLE") {
	case "survivor":
		time.Sleep(time.Hour)
		return
	case "forker":
		spawnSurvivor(true)
		return
	case "daemon":
		fakeDaemon()
		return
	case "cat":
		b, err := os.ReadFile(os.Args[len(os.Args)-1])
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
		return
	case "dial":
		dial(os.Args[len(os.Args)-1])
		return
	}
	var c config
	if err := json.Unmarshal([]byte(os.Getenv("LOGIST_ATTACK")), &c); err != nil {
		fmt.Println("bad config:", err)
		os.Exit(2)
	}
	if os.Getenv("LOGIST_ATTACK_ROLE") == "sleeper" {
		spawnSurvivor(true)
		forker(c)
		fmt.Println("sleeping")
		time.Sleep(time.Hour)
		return
	}
	signal.Ignore(syscall.SIGXFSZ)
	enc := json.NewEncoder(os.Stdout)
	if os.Getenv("LOGIST_ATTACK_ROLE") == "one" {
		for _, a := range attacks(c) {
			if a.name == os.Getenv("LOGIST_ATTACK_ONE") {
				enc.Encode(a.run())
			}
		}
		return
	}
	warmThreads(8)
	for _, a := range attacks(c) {
		var r result
		if apart[a.name] {
			r = runApart(a.name)
		} else {
			r = a.run()
		}
		r.Name = a.name
		enc.Encode(r)
	}
}

// apart are the attacks that drive a process into its limits (processes,
// memory), where the Go runtime itself may fail: no thread, no memory. The
// limit holding is the result they look for, so each runs in a process of
// its own, and the attacker goes on to the next attack whatever became of it.
var apart = map[string]bool{"fork-bomb": true, "allocate-memory": true}

// runApart runs one attack in a child process (role "one") and returns
// what it reported; a child that ended before it could report was stopped
// by a limit: the forbidden thing did not work.
func runApart(name string) result {
	self, _ := os.Executable()
	cmd := exec.Command(self, "attack-"+name)
	cmd.Env = append(os.Environ(), "LOGIST_ATTACK_ROLE=one", "LOGIST_ATTACK_ONE="+name)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	var r result
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		tail := errb.String()
		if len(tail) > 300 {
			tail = tail[:300]
		}
		return result{Detail: fmt.Sprintf("the attack's process ended (%v) before it reported: %s", err, tail)}
	}
	return r
}

// warmThreads makes the runtime start n threads now and keep them idle, so
// that while a child holds the process limit the attacker's runtime needs
// no new one.
func warmThreads(n int) {
	var started, release sync.WaitGroup
	started.Add(n)
	release.Add(1)
	var done sync.WaitGroup
	done.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			started.Done()
			release.Wait()
			runtime.UnlockOSThread()
		}()
	}
	started.Wait()
	release.Done()
	done.Wait()
}

type attack struct {
	name string
	run  func() result
}

func read(paths ...string) result {
	var r result
	var details []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			details = append(details, err.Error())
			continue
		}
		if len(b) > 0 {
			r.OK = true
		}
		r.Data += string(b) + "\n"
	}
	r.Detail = strings.Join(details, "; ")
	return r
}

func write(marker string, paths ...string) result {
	var r result
	var details []string
	for _, p := range paths {
		err := os.MkdirAll(filepath.Dir(p), 0o755)
		if err == nil {
			var f *os.File
			f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err == nil {
				_, err = f.WriteString(marker)
				f.Close()
			}
		}
		if err != nil {
			details = append(details, err.Error())
			continue
		}
		r.OK = true
		details = append(details, "wrote "+p)
	}
	r.Detail = strings.Join(details, "; ")
	return r
}

func attacks(c config) []attack {
	m := c.Marker
	return []attack{
		{"read-own-history", func() result { return read(filepath.Join(c.JobDir, "history.jsonl"), "../history.jsonl") }},
		{"append-own-history", func() result { return write(m, filepath.Join(c.JobDir, "history.jsonl")) }},
		{"rewrite-own-job-json", func() result {
			r := write(m, filepath.Join(c.JobDir, "job.json"))
			if err := os.WriteFile(filepath.Join(c.JobDir, "job.json.tmp"), []byte(m), 0o644); err == nil {
				if err := os.Rename(filepath.Join(c.JobDir, "job.json.tmp"), filepath.Join(c.JobDir, "job.json")); err == nil {
					r.OK, r.Detail = true, r.Detail+"; renamed over job.json"
				}
			}
			return r
		}},
		{"write-own-request", func() result { return write(m, filepath.Join(c.JobDir, "requests", "000001.json")) }},
		{"read-own-request-and-snapshots", func() result {
			return read(filepath.Join(c.JobDir, "requests", "000001.json"), filepath.Join(c.JobDir, "snapshots", "obj"))
		}},
		{"list-jobs", func() result {
			var r result
			for _, d := range []string{c.JobsDir, c.JobDir, filepath.Join(c.JobDir, "requests")} {
				ents, err := os.ReadDir(d)
				if err != nil {
					r.Detail += err.Error() + "; "
					continue
				}
				for _, e := range ents {
					r.Data += d + "/" + e.Name() + "\n"
				}
			}
			return r
		}},
		{"read-other-job", func() result {
			return read(filepath.Join(c.OtherJob, "history.jsonl"), filepath.Join(c.OtherJob, "job.json"), filepath.Join(c.OtherJob, "workspace", "secret.txt"))
		}},
		{"read-signing-key", func() result { return read(filepath.Join(c.JobsDir, ".logist", "signing.key")) }},
		{"write-other-workspace", func() result { return write(m, filepath.Join(c.OtherJob, "workspace", "pwned")) }},
		{"drop-manifest", func() result { return write(m, filepath.Join(c.JobsDir, "evil-job", "job.json")) }},
		{"forge-call-result", func() result {
			return write(m, filepath.Join(c.CallDir, "result.json"), filepath.Join(c.CallDir, "stdout"), filepath.Join(c.CallDir, "forged"))
		}},
		{"write-host-tmp", func() result { return write(m, filepath.Join(c.HostTmp, "logist-escape-"+m)) }},
		{"write-daemon-home", func() result {
			return write(m, filepath.Join(c.DaemonHome, "pwned"), filepath.Join(c.RealHome, "logist-escape-"+m))
		}},
		{"write-system", func() result {
			return write(m, "/etc/logist-escape-"+m, "/usr/logist-escape-"+m)
		}},
		{"read-etc-shadow", func() result { return read("/etc/shadow") }},
		{"read-daemon-environ", func() result { return read(fmt.Sprintf("/proc/%d/environ", c.DaemonPid)) }},
		{"see-host-processes", func() result {
			var r result
			ents, err := os.ReadDir("/proc")
			if err != nil {
				r.Detail = err.Error()
			}
			n := 0
			for _, e := range ents {
				if e.Name()[0] < '0' || e.Name()[0] > '9' {
					continue
				}
				n++
				if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil {
					r.Data += strings.ReplaceAll(string(b), "\x00", " ") + "\n"
				}
			}
			// Guessing the pid works even without a listing.
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c.DaemonPid)); err == nil {
				r.Data += strings.ReplaceAll(string(b), "\x00", " ") + "\n"
			}
			r.Detail += fmt.Sprintf("%d processes listed", n)
			return r
		}},
		{"signal-daemon", func() result {
			err := syscall.Kill(c.DaemonPid, syscall.SIGUSR1)
			return result{OK: err == nil, Detail: fmt.Sprint(err)}
		}},
		{"leave-survivors", func() result {
			spawnSurvivor(false)
			spawnSurvivor(true)
			forker(c)
			return result{Detail: "started a background child, a setsid child and a double-forked setsid grandchild"}
		}},
		{"fork-bomb", func() result {
			// Bounded: at most the limit plus 100 processes, so a host whose
			// limit failed survives the test.
			// The children are killed and reaped before the next attack:
			// left running, they would hold the process limit and the
			// attacker's own runtime could not start a thread.
			n, tries := 0, c.Processes+100
			var err error
			var pids []int
			for i := 0; i < tries; i++ {
				var pid int
				pid, err = syscall.ForkExec("/bin/sleep", []string{"sleep", "30"}, &syscall.ProcAttr{})
				if err != nil {
					break
				}
				pids = append(pids, pid)
				n++
			}
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			for _, pid := range pids {
				var ws syscall.WaitStatus
				syscall.Wait4(pid, &ws, 0, nil)
			}
			return result{OK: n == tries, Detail: fmt.Sprintf("%d of %d processes started; last error %v", n, tries, err)}
		}},
		{"allocate-memory", func() result {
			size := int(c.MemoryBytes + 64<<20)
			b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
			if err != nil {
				return result{Detail: err.Error()}
			}
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			syscall.Munmap(b)
			return result{OK: true, Detail: fmt.Sprintf("allocated %d bytes", size)}
		}},
		{"fill-disk-one-file", func() result {
			return fill(filepath.Join(c.Workspace, "big"), c.FileBytes+1<<20)
		}},
		{"fill-tmp", func() result {
			var total int64
			var last result
			for i := 0; total <= c.TmpBytes; i++ {
				last = fill(filepath.Join(os.TempDir(), fmt.Sprintf("fill-%d", i)), c.FileBytes/2)
				total += c.FileBytes / 2
				if !last.OK {
					return result{Detail: fmt.Sprintf("stopped after %d bytes: %s", total, last.Detail)}
				}
			}
			return result{OK: true, Detail: fmt.Sprintf("wrote %d bytes into %s", total, os.TempDir())}
		}},
		{"symlink-read-out", func() result {
			return read(filepath.Join(c.Workspace, "link-job"), filepath.Join(c.Workspace, "link-key"), filepath.Join(c.Workspace, "link-jobs", "otherjob-zq7", "history.jsonl"))
		}},
		{"symlink-write-out", func() result { return write(m, filepath.Join(c.Workspace, "link-job")) }},
		{"connect-daemon-listen-port", func() result {
			conn, err := net.DialTimeout("tcp", c.TCPAddr, 2*time.Second)
			if err != nil {
				return result{Detail: err.Error()}
			}
			conn.Write([]byte(m))
			conn.Close()
			return result{OK: true, Detail: "connected to " + c.TCPAddr}
		}},
		{"connect-daemon-listen-port-mptcp", func() result {
			d := net.Dialer{Timeout: 2 * time.Second}
			d.SetMultipathTCP(true)
			conn, err := d.Dial("tcp", c.TCPAddr)
			if err != nil {
				return result{Detail: err.Error()}
			}
			conn.Write([]byte(m))
			conn.Close()
			return result{OK: true, Detail: "connected to " + c.TCPAddr}
		}},
		{"send-udp-to-host", func() result {
			conn, err := net.Dial("udp", c.UDPAddr)
			if err != nil {
				return result{Detail: err.Error()}
			}
			defer conn.Close()
			for i := 0; i < 3; i++ {
				if _, err := conn.Write([]byte(m)); err != nil {
					return result{Detail: err.Error()}
				}
			}
			return result{Detail: "sent (the host side tells whether it arrived)"}
		}},
		{"egress-unlisted", func() result {
			// Through the network allowlist's egress proxy (HTTPS_PROXY,
			// with the call's own token) to destinations it does not
			// list: the daemon's listener, a name, an IP of the host.
			var details []string
			for _, to := range []string{c.TCPAddr, "example.com:443", "localhost:" + c.TCPAddr[strings.LastIndex(c.TCPAddr, ":")+1:]} {
				status, err := connectVia(os.Getenv("HTTPS_PROXY"), to)
				if err != nil {
					details = append(details, to+": "+err.Error())
					continue
				}
				if strings.Contains(status, " 200") {
					return result{OK: true, Detail: "the egress proxy tunnelled to " + to}
				}
				details = append(details, to+": "+status)
			}
			return result{Detail: strings.Join(details, "; ")}
		}},
		{"connect-host-unix-socket", func() result {
			conn, err := net.DialTimeout("unix", c.UnixSocket, 2*time.Second)
			if err != nil {
				return result{Detail: err.Error()}
			}
			conn.Write([]byte(m))
			conn.Close()
			return result{OK: true, Detail: "connected to " + c.UnixSocket}
		}},
		{"capabilities", func() result {
			b, _ := os.ReadFile("/proc/self/status")
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "CapEff:") || strings.HasPrefix(l, "CapPrm:") || strings.HasPrefix(l, "CapAmb:") {
					if !strings.HasSuffix(strings.TrimSpace(l), "0000000000000000") {
						return result{OK: true, Detail: l}
					}
				}
			}
			return result{Detail: "no capabilities"}
		}},
	}
}

func fill(p string, size int64) result {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return result{Detail: err.Error()}
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for n < size {
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			return result{Detail: fmt.Sprintf("wrote %d bytes: %v", n, err)}
		}
	}
	return result{OK: true, Detail: fmt.Sprintf("wrote %d bytes", n)}
}

// spawnSurvivor starts a sleeping copy of this program named by the
// marker, in a new session if setsid.
func spawnSurvivor(setsid bool) {
	self, _ := os.Executable()
	cmd := exec.Command(self, "survivor", os.Getenv("LOGIST_ATTACK_MARKER"))
	cmd.Env = append(os.Environ(), "LOGIST_ATTACK_ROLE=survivor")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	cmd.Start()
}

// forker starts a child that starts a setsid survivor and exits: the
// survivor's parent is gone before the call ends (a double fork).
func forker(c config) {
	self, _ := os.Executable()
	cmd := exec.Command(self, "forker", c.Marker)
	cmd.Env = append(os.Environ(), "LOGIST_ATTACK_ROLE=forker")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Run()
}

// dial sends a line to addr (the metering proxy, as the sandbox sees it)
// and prints the reply.
func dial(addr string) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "ping from %s\n", os.Getenv("LOGIST_PROXY_ADDR"))
	conn.(*net.TCPConn).CloseWrite()
	b := make([]byte, 512)
	n, _ := conn.Read(b)
	os.Stdout.Write(b[:n])
}

// fakeDaemon stands in for logistd: a secret in its environment, made
// non-dumpable as logistd makes itself, writing down every SIGUSR1.
func fakeDaemon() {
	if err := sandbox.HideProcess(); err != nil {
		fmt.Println("hide:", err)
		os.Exit(2)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	fmt.Println("ready")
	for range sig {
		os.WriteFile(os.Getenv("LOGIST_ATTACK_SIGNALED"), []byte("signaled"), 0o644)
	}
}

// connectVia asks the HTTP proxy at proxyURL (with its user info as
// Proxy-Authorization) for a CONNECT tunnel to hostport, and returns the
// proxy's status line.
func connectVia(proxyURL, hostport string) (string, error) {
	u, err := url.Parse(proxyURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("no proxy in HTTPS_PROXY (%q)", proxyURL)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	pw, _ := u.User.Password()
	auth := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pw))
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", hostport, hostport, auth)
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}
