package devlib

import (
	"context"
	"strings"
	"testing"
)

// TestRunOutputFolder: an Output that is a folder is refused before anything is built, naming
// it (the library made its temporary file in the folder's parent and failed on the rename at
// the end: "rename /.tmp... /tmp: file exists"; probe 12).
func TestRunOutputFolder(t *testing.T) {
	dir := t.TempDir()
	err := Run(context.Background(), Options{Home: "/nonexistent-nvshmem", Output: dir, Target: "sm_90"}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "Output "+dir+" is a folder") {
		t.Fatalf("Output a folder: %v; want it refused naming the folder", err)
	}
}
