package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
)

// RepliesDir holds the replies of roles played by a human, one file per
// turn, named after the turn.
const RepliesDir = "replies"

var replyName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`) })

// ReplyFile is where the reply to a request is filed: under its turn key
// (metadata turn_key) when it has one, else under its interaction.
func ReplyFile(jobDir string, req *Request) (string, error) {
	name := fmt.Sprintf("interaction-%06d", req.Interaction)
	if k, ok := req.Metadata[history.MetaTurnKey].(string); ok && k != "" {
		if !replyName().MatchString(k) {
			return "", fmt.Errorf("turn key %q is not a file name", k)
		}
		name = k
	}
	return filepath.Join(jobDir, RepliesDir, name+".json"), nil
}

// Human is a role played by the steward: its answer is the reply filed by
// `logist reply`, validated like an agent's. Until the reply exists the
// call reports codes.AwaitingReply and the job waits, visibly.
type Human struct{}

// Call returns the filed reply.
func (Human) Call(ctx context.Context, req *Request) (*Result, error) {
	p, err := ReplyFile(req.JobDir, req)
	if err != nil {
		return nil, &Error{Code: codes.AgentConfig, Msg: err.Error()}
	}
	b, err := readCapped(p, DefaultMaxOutput)
	if os.IsNotExist(err) {
		return nil, &Error{Code: codes.AwaitingReply, Msg: fmt.Sprintf("waiting for logist reply %s --as %s", req.JobID, req.Role)}
	}
	if err != nil {
		return nil, &Error{Code: codes.AgentConfig, Msg: fmt.Sprintf("reply %s: %v", p, err)}
	}
	return &Result{Raw: b}, nil
}
