package testkit

import (
	"errors"
	"net"
	"time"
)

// ClosedByServer reports whether the server closed c without a word: a read ends with EOF or a
// reset, not with data nor at the 30 s bound only a broken server reaches.
func ClosedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := c.Read(make([]byte, 1))
	var ne net.Error
	return n == 0 && err != nil && !(errors.As(err, &ne) && ne.Timeout())
}
