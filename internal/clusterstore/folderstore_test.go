package clusterstore_test

import (
	"testing"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/clusterstore/storetest"
)

func TestFileStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) clusterstore.Store {
		s, err := clusterstore.OpenFile(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
