package fsys

import (
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

func TestContractOS(t *testing.T) {
	porttest.FSContract(t, func(t *testing.T) (afero.Fs, string) {
		return NewOS(), t.TempDir()
	})
}

func TestContractMemory(t *testing.T) {
	porttest.FSContract(t, func(t *testing.T) (afero.Fs, string) {
		fsys := NewMemory()
		if err := fsys.MkdirAll("/work", 0o755); err != nil {
			t.Fatal(err)
		}
		return fsys, "/work"
	})
}

func TestContractRoot(t *testing.T) {
	porttest.FSContract(t, func(t *testing.T) (afero.Fs, string) {
		r, err := OpenRoot(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r, r.Dir()
	})
}

func TestAbilityContracts(t *testing.T) {
	backends := map[string]porttest.NewFS{
		"os": func(t *testing.T) (afero.Fs, string) { return NewOS(), t.TempDir() },
		"memory": func(t *testing.T) (afero.Fs, string) {
			m := NewMemory()
			if err := m.MkdirAll("/work", 0o755); err != nil {
				t.Fatal(err)
			}
			return m, "/work"
		},
		"root": func(t *testing.T) (afero.Fs, string) {
			r, err := OpenRoot(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return r, r.Dir()
		},
	}
	for name, newFs := range backends {
		t.Run(name+"/confiner", func(t *testing.T) { porttest.ConfinerContract(t, newFs) })
		t.Run(name+"/regular opener", func(t *testing.T) { porttest.RegularOpenerContract(t, newFs) })
		if name != "memory" { // memory views are base paths: they have no handles to hand out
			t.Run(name+"/confiner subviews", func(t *testing.T) { porttest.ConfinerSubviewContract(t, newFs) })
			t.Run(name+"/dir renamer", func(t *testing.T) { porttest.DirRenamerContract(t, newFs) })
		}
	}
	t.Run("statfs", func(t *testing.T) { porttest.DiskSpaceContract(t, Statfs{}, t.TempDir()) })
}
