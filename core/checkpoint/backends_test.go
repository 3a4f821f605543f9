package checkpoint_test

import (
	"testing"

	"github.com/supervaize/svz/core/store/memory"
)

func TestSuiteMemory(t *testing.T) {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	suite(t, s)
}
