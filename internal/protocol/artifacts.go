package protocol

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/logist/logist/internal/atomicfile"
)

// ArtifactsDir is the artifact store's folder inside a job folder.
const ArtifactsDir = "artifacts"

// Store is a job's content-addressed artifact store: each artifact is the
// file <Dir>/<hex sha256 of its content>, named to events as
// "sha256:<hex>". Content never changes under a name, so writing the same
// bytes twice is harmless and an edit is always detectable.
type Store struct {
	Dir string
}

// NewStore is the store of the job folder jobDir.
func NewStore(jobDir string) Store { return Store{Dir: filepath.Join(jobDir, ArtifactsDir)} }

var artifactID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) })

// ArtifactID is the id of content b.
func ArtifactID(b []byte) string { return "sha256:" + sha256Hex(b) }

// ValidArtifactID reports whether id has the "sha256:<64 hex>" form.
func ValidArtifactID(id string) bool { return artifactID().MatchString(id) }

// ArtifactError says an artifact is missing or its content does not hash
// to its id; Class is FailMissingArtifact or FailHashMismatch.
type ArtifactError struct {
	ID    string
	Class string
	Msg   string
}

func (e *ArtifactError) Error() string { return "artifact " + e.ID + ": " + e.Msg }

// Put stores b and returns its id. The file is written under a temporary
// name, fsync'd, renamed into place and the folder fsync'd before Put
// returns, so an event that names the artifact is only committed after the
// artifact is durable (seed 003: artifact writes complete before the event
// that references them). An artifact already stored intact is left alone.
func (s Store) Put(b []byte) (string, error) {
	id := ArtifactID(b)
	if s.Verify(id) == nil {
		return id, nil
	}
	if err := atomicfile.MkdirAll(s.Dir, 0o700); err != nil {
		return "", err
	}
	// Replaces a damaged copy as well: the content is known to be right.
	if err := atomicfile.WriteFile(s.path(id), b, 0o600); err != nil {
		return "", err
	}
	return id, nil
}

func (s Store) path(id string) string {
	return filepath.Join(s.Dir, strings.TrimPrefix(id, "sha256:"))
}

// Get returns an artifact's content, checked against its id.
func (s Store) Get(id string) ([]byte, error) {
	if !ValidArtifactID(id) {
		return nil, &ArtifactError{ID: id, Class: FailMissingArtifact, Msg: "not an artifact id"}
	}
	b, err := os.ReadFile(s.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &ArtifactError{ID: id, Class: FailMissingArtifact, Msg: "not in the artifact store"}
	}
	if err != nil {
		return nil, err
	}
	if got := ArtifactID(b); got != id {
		return nil, &ArtifactError{ID: id, Class: FailHashMismatch, Msg: "content hashes to " + got}
	}
	return b, nil
}

// Verify checks that an artifact exists and its content hashes to its id.
// It returns *ArtifactError for a missing or altered artifact.
func (s Store) Verify(id string) error {
	_, err := s.Get(id)
	return err
}

// artifactClass is the failure class of an artifact error.
func artifactClass(err error) string {
	var ae *ArtifactError
	if errors.As(err, &ae) {
		return ae.Class
	}
	return FailMissingArtifact
}
