package jit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/ptx"
)

// clusterSrc: cluster_ids has thread 0 of every block write its cluster rank, the cluster's
// block count, its cluster id (x + 16 y) and 1 after a cluster barrier, then lets dependent
// launches start; bump waits for the grid it depends on (griddepcontrol.wait) and adds 100
// to the first n words.
const clusterSrc = `
.version 8.0
.target sm_90a
.address_size 64

.visible .entry cluster_ids(.param .u64 pout)
{
	.reg .b32 %r<12>;
	.reg .b64 %rd<4>;
	.reg .pred %p<2>;
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	mov.u32 %r0, %tid.x;
	setp.ne.u32 %p0, %r0, 0;
	@%p0 bra LDONE;
	mov.u32 %r1, %ctaid.x;
	mov.u32 %r2, %ctaid.y;
	mov.u32 %r3, %nctaid.x;
	mad.lo.u32 %r4, %r2, %r3, %r1;
	mul.wide.u32 %rd0, %r4, 16;
	ld.param.u64 %rd1, [pout];
	cvta.to.global.u64 %rd1, %rd1;
	add.u64 %rd1, %rd1, %rd0;
	mov.u32 %r5, %cluster_ctarank;
	mov.u32 %r6, %cluster_nctarank;
	mov.u32 %r7, %clusterid.x;
	mov.u32 %r8, %clusterid.y;
	mad.lo.u32 %r9, %r8, 16, %r7;
	mov.u32 %r10, 1;
	st.global.v4.u32 [%rd1], {%r5, %r6, %r9, %r10};
LDONE:
	griddepcontrol.launch_dependents;
	ret;
}

.visible .entry bump(.param .u64 pout, .param .u32 n)
{
	.reg .b32 %r<6>;
	.reg .b64 %rd<4>;
	.reg .pred %p<2>;
	griddepcontrol.wait;
	mov.u32 %r0, %tid.x;
	ld.param.u32 %r1, [n];
	setp.ge.u32 %p0, %r0, %r1;
	@%p0 bra LDONE;
	ld.param.u64 %rd0, [pout];
	cvta.to.global.u64 %rd0, %rd0;
	mul.wide.u32 %rd1, %r0, 4;
	add.u64 %rd0, %rd0, %rd1;
	ld.global.u32 %r2, [%rd0];
	add.u32 %r2, %r2, 100;
	st.global.u32 [%rd0], %r2;
LDONE:
	ret;
}
`

// clusterProgram launches cluster_ids on a 4 x 2 grid in 2 x 2 clusters and bump after it
// with PDL, directly and through a captured graph, and checks every block's cluster
// registers; then the cluster and PDL launch errors.
func clusterProgram(d *Device) error {
	mod, err := ptx.Parse(clusterSrc)
	if err != nil {
		return err
	}
	m, err := d.Load(Source{Module: mod})
	if err != nil {
		return err
	}
	defer m.Close()
	ids, err := m.Function("cluster_ids")
	if err != nil {
		return err
	}
	bump, err := m.Function("bump")
	if err != nil {
		return err
	}
	const gx, gy = 4, 2
	out, err := Alloc[uint32](d, 16*4) // the 16-block cluster below writes 16 blocks
	if err != nil {
		return err
	}
	defer out.Free()
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	run := func(s *Stream) error {
		if err := ids.Launch(LaunchConfig{Grid: Dim3{gx, gy, 1}, Block: D1(64), Cluster: Dim3{2, 2, 1}, Stream: s}, out); err != nil {
			return err
		}
		return bump.Launch(LaunchConfig{Grid: D1(1), Block: D1(64), Stream: s, PDL: true}, out, uint32(gx*gy*4))
	}
	check := func(how string, out *Buffer[uint32]) error {
		got := make([]uint32, gx*gy*4)
		if err := out.CopyToHost(got); err != nil {
			return err
		}
		for y := 0; y < gy; y++ {
			for x := 0; x < gx; x++ {
				b := (y*gx + x) * 4
				want := []uint32{uint32(x%2 + 2*(y%2)), 4, uint32(x/2 + 16*(y/2)), 1}
				for i := range want {
					if got[b+i] != want[i]+100 {
						return fmt.Errorf("%s: block (%d, %d): cluster rank, size, id, 1 = %v, want %v + 100", how, x, y, got[b:b+4], want)
					}
				}
			}
		}
		return nil
	}
	if err := run(s); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	if err := check("launch", out); err != nil {
		return err
	}
	if err := out.CopyFromHost(make([]uint32, gx*gy*4)); err != nil {
		return err
	}
	if err := s.BeginCapture(); err != nil {
		return err
	}
	if err := run(s); err != nil {
		return err
	}
	g, err := s.EndCapture()
	if err != nil {
		return err
	}
	defer g.Close()
	x, err := g.Instantiate()
	if err != nil {
		return err
	}
	defer x.Close()
	if err := x.Launch(s); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	if err := check("graph replay", out); err != nil {
		return err
	}
	// New arguments for both nodes keep the cluster launch's shape.
	out2, err := Alloc[uint32](d, gx*gy*4)
	if err != nil {
		return err
	}
	defer out2.Free()
	if err := x.SetArgs(0, out2); err != nil {
		return err
	}
	if err := x.SetArgs(1, out2, uint32(gx*gy*4)); err != nil {
		return err
	}
	if err := x.Launch(s); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	if err := check("graph replay after SetArgs", out2); err != nil {
		return err
	}

	// A 16-block cluster needs NonPortableCluster.
	big := LaunchConfig{Grid: D1(16), Block: D1(32), Cluster: D1(16)}
	if err := ids.Launch(big, out); err == nil || !strings.Contains(err.Error(), "cluster 16x1x1 has 16 blocks, more than 8 (the portable limit; set NonPortableCluster for up to 16)") {
		return fmt.Errorf("a 16-block cluster: %v", err)
	}
	big.NonPortableCluster = true
	if err := ids.Launch(big, out); err != nil {
		return fmt.Errorf("a 16-block non-portable cluster: %v", err)
	}
	if err := d.Synchronize(); err != nil {
		return err
	}
	for _, c := range []struct {
		cfg  LaunchConfig
		want string
	}{
		{LaunchConfig{Grid: D1(6), Block: D1(32), Cluster: D1(4)}, "grid 6x1x1 is not a whole number of clusters 4x1x1"},
		{LaunchConfig{Grid: D1(32), Block: D1(32), Cluster: D1(32), NonPortableCluster: true}, "more than 16 (the non-portable limit)"},
		{LaunchConfig{Grid: D1(4), Block: D1(32), Cluster: Dim3{-1, 1, 1}}, "must be positive"},
		{LaunchConfig{Grid: D1(4), Block: D1(32), NonPortableCluster: true}, "NonPortableCluster without a Cluster shape"},
		{LaunchConfig{Grid: D1(4), Block: D1(32), Cluster: D1(2), CoResident: true}, "a cooperative launch takes no clusters"},
		{LaunchConfig{Grid: D1(4), Block: D1(32), PDL: true, CoResident: true}, "a cooperative launch takes no programmatic dependency"},
	} {
		if err := ids.Launch(c.cfg, out); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "launch of cluster_ids") {
			return fmt.Errorf("cluster %v: got %v, want an error containing %q", c.cfg.Cluster, err, c.want)
		}
	}
	return nil
}

// TestEmuCluster runs clusterProgram on the emulator.
func TestEmuCluster(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := clusterProgram(d); err != nil {
		t.Fatal(err)
	}
}

// TestEmuClusterCollective: launches on 2 emulated ranks keep their cluster shapes, the same
// on every GPU or (every rank's stream runs its own grids) different.
func TestEmuClusterCollective(t *testing.T) {
	mod, err := ptx.Parse(clusterSrc)
	if err != nil {
		t.Fatal(err)
	}
	run := func(cluster func(rank int) Dim3) error {
		return RunRanks(RanksOptions{Backend: Emulator, World: 2}, func(r *Rank) error {
			m, err := r.Device.Load(Source{Module: mod})
			if err != nil {
				return err
			}
			ids, err := m.Function("cluster_ids")
			if err != nil {
				return err
			}
			out, err := Alloc[uint32](r.Device, 4*4)
			if err != nil {
				return err
			}
			cl := cluster(r.Rank)
			if err := ids.Launch(LaunchConfig{Grid: D1(4), Block: D1(32), Cluster: cl, Collective: CollectiveOn}, out); err != nil {
				return err
			}
			got := make([]uint32, 16)
			if err := out.CopyToHost(got); err != nil {
				return err
			}
			for b := 0; b < 4; b++ {
				if want := []uint32{uint32(b % cl.X), uint32(cl.X), uint32(b / cl.X), 1}; fmt.Sprint(got[4*b:4*b+4]) != fmt.Sprint(want) {
					return fmt.Errorf("rank %d block %d: %v, want %v", r.Rank, b, got[4*b:4*b+4], want)
				}
			}
			return nil
		})
	}
	if err := run(func(int) Dim3 { return D1(2) }); err != nil {
		t.Fatal(err)
	}
	if err := run(func(r int) Dim3 { return D1(2 * (r + 1)) }); err != nil {
		t.Fatalf("different clusters: %v", err)
	}
}

// TestHopperTestKernelsAssemble: ptxas accepts the TMA and cluster test kernels for sm_90a,
// so the GPU tests run what the emulator tests ran.
func TestHopperTestKernelsAssemble(t *testing.T) {
	ptxas := tooltest.Ptxas(t)
	for name, src := range map[string]string{"tma": tmaSrc, "cluster": clusterSrc} {
		dir := t.TempDir()
		f := filepath.Join(dir, name+".ptx")
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(ptxas, "-arch=sm_90a", f, "-o", filepath.Join(dir, name+".cubin")).CombinedOutput(); err != nil {
			t.Fatalf("ptxas %s: %v\n%s", name, err, out)
		}
	}
}
