package testkit

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RIE runs the AWS Lambda Runtime Interface Emulator (bin) with bootstrap as the function and
// env added to the test's environment, which the emulator hands to the bootstrap. It returns the
// address of the emulator's invoke API and the output of the emulator and bootstrap; both stop
// when the test ends, and the output is logged if the test failed.
//
// The emulator binds the two ports it is given itself, so they are picked just before it starts;
// when another process takes one first, the emulator exits and RIE tries again with others.
func RIE(t testing.TB, bin string, env []string, bootstrap string) (addr string, logs *LogBuffer) {
	t.Helper()
	const attempts = 3
	for i := 1; ; i++ {
		addr, logs, lostPort := startRIE(t, bin, env, bootstrap)
		if !lostPort {
			return addr, logs
		}
		if i == attempts {
			t.Fatalf("the emulator lost its ports to other processes %d times:\n%s", attempts, logs)
		}
	}
}

// startRIE makes one attempt; lostPort reports an emulator that exited because a port was taken.
func startRIE(t testing.TB, bin string, env []string, bootstrap string) (addr string, logs *LogBuffer, lostPort bool) {
	t.Helper()
	var ports [2]string
	for i := range ports {
		p, err := freePort()
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		ports[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	if ports[0] == ports[1] {
		return "", &LogBuffer{}, true
	}
	cmd := exec.Command(bin, "--runtime-interface-emulator-address", ports[0], "--runtime-api-address", ports[1], bootstrap)
	cmd.Env = append(os.Environ(), env...)
	logs = &LogBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) { // generous: a loaded machine starts processes slowly
		select {
		case <-exited:
			if strings.Contains(logs.String(), "address already in use") {
				return "", logs, true
			}
			t.Fatalf("the emulator exited before listening:\n%s", logs)
		default:
		}
		if c, err := net.Dial("tcp", ports[0]); err == nil {
			_ = c.Close()
			// Something listens there: the emulator, or a process that took the port first.
			if listensOn(cmd.Process.Pid, ports[0]) {
				break
			}
			stop()
			return "", logs, true
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("the emulator does not listen on %s:\n%s", ports[0], logs)
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("emulator output:\n%s", logs)
		}
	})
	return ports[0], logs, false
}

// listensOn reports whether process pid holds the listening socket of addr (127.0.0.1:port), by
// matching the socket inodes of its file descriptors with /proc/net/tcp.
func listensOn(pid int, addr string) bool {
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false
	}
	local := fmt.Sprintf("0100007F:%04X", p) // 127.0.0.1 in host (little-endian) order
	var inode string
	for _, line := range strings.Split(string(table), "\n") {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		f := strings.Fields(line)
		if len(f) >= 10 && f[1] == local && f[3] == "0A" { // 0A: LISTEN
			inode = f[9]
			break
		}
	}
	if inode == "" {
		return false
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && target == "socket:["+inode+"]" {
			return true
		}
	}
	return false
}
