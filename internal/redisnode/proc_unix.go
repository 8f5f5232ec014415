//go:build unix

package redisnode

import "syscall"

// The process is a group leader (Setpgid), so -pid signals the whole group.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }
func stopGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGSTOP) }
func contGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGCONT) }

// reservePort binds a TCP socket to 127.0.0.1:port without listening, and
// returns the function that closes it. Connections to the port are then
// refused, as by a dead server, and the kernel hands the port to no
// socket bound to port 0 (freePort, and so no other node) while the
// reservation stands: a killed node's address stays dead for the tests
// that hold it as one, rather than answering as some other test's node.
// SO_REUSEADDR lets it bind beside the killed server's TIME_WAIT
// connections, and lets the node itself bind the port again on Restart.
// Best effort: a failure leaves the port unreserved.
func reservePort(port int) (release func()) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return func() {}
	}
	syscall.CloseOnExec(fd)
	if syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1) != nil ||
		syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}) != nil {
		_ = syscall.Close(fd)
		return func() {}
	}
	return func() { _ = syscall.Close(fd) }
}
