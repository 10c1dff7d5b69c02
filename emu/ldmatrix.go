package emu

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"

	"github.com/kgen-dev/kgen/ptx"
)

// ldmatrix / stmatrix .m8n8 .b16: warp-collective loads and stores of 8x8 matrices of 16-bit
// elements between shared memory and registers. For .xN, lanes 8i..8i+7 give the addresses
// of rows 0..7 of matrix i (each row 16 contiguous bytes, 16-byte aligned). Register i of
// lane l holds row l/4, elements 2(l%4) and 2(l%4)+1 of matrix i (the lower element in the
// low half); with .trans it holds column l/4, elements of rows 2(l%4) and 2(l%4)+1.
//
// The sm_100a-only 8-bit forms (.m16n16, .m8n16, .m16n8) are not emulated.

func (d *decoder) decodeMatrix(di *dinst, in *ptx.Instr, toks tokens) error {
	store := toks[0] == "stmatrix"
	if !toks.has("sync") || !toks.has("aligned") {
		return errUnsupported
	}
	if !toks.has("m8n8") || in.Type() != ptx.B16 {
		return fmt.Errorf("the emulator implements %s .m8n8 .b16 only (not the sm_100a 8-bit forms)", toks[0])
	}
	num := map[string]int{"x1": 1, "x2": 2, "x4": 4}[toks.any("x1", "x2", "x4")]
	if num == 0 || len(in.Args) != 2 {
		return errUnsupported
	}
	regs, at := in.Args[0], in.Args[1]
	if store {
		regs, at = in.Args[1], in.Args[0]
	}
	v, ok := regs.(ptx.Vec)
	if !ok || len(v) != num {
		return fmt.Errorf("%s .x%d takes a vector of %d registers", toks[0], num, num)
	}
	for _, o := range v {
		if store {
			s, err := d.src(o, ptx.B32)
			if err != nil {
				return err
			}
			di.av = append(di.av, s)
			continue
		}
		s, _, err := d.dst(o)
		if err != nil {
			return err
		}
		di.dv = append(di.dv, s)
	}
	di.space = spaceOf(toks)
	if di.space != spShared && di.space != spGeneric {
		return errUnsupported
	}
	if err := d.addr(di, at); err != nil {
		return err
	}
	di.align, di.vec = 16, uint8(num)
	if toks.has("trans") {
		di.flags |= 1
	}
	di.kind, di.aligned = ctlWarpSync, true
	if store {
		di.exec = execStmatrix
	} else {
		di.exec = execLdmatrix
	}
	return nil
}

// matrixRows resolves the 8*num row addresses of an ldmatrix/stmatrix: rows[i*8+r] is row r
// of matrix i, given by lane i*8+r. It reports a fault (and returns nil) on a bad address.
func (w *warp) matrixRows(in *dinst, write bool) [][]byte {
	n := 8 * int(in.vec)
	rows := make([][]byte, n)
	for ln := 0; ln < n; ln++ {
		addr := w.ea(in, ln)
		if w.l.sanitize && addr&15 != 0 {
			w.fault(in, ln, KindMisaligned, fmt.Sprintf("row address %#x (row %d of matrix %d, given by lane %d) is not 16-byte aligned", addr, ln%8, ln/8, ln))
			return nil
		}
		if in.base == baseReg && in.space == spGeneric && region(addr) != regionShared {
			w.fault(in, ln, KindBadAddress, fmt.Sprintf("row address %#x (given by lane %d) is not in shared memory: %s accesses shared memory only", addr, ln, in.src.Op))
			return nil
		}
		b, wh, off, f := w.span(in, ln, addr, 16)
		if f != nil {
			w.memFault(in, ln, f)
			return nil
		}
		if wh != whShared {
			w.fault(in, ln, KindBadAddress, fmt.Sprintf("row address %#x (given by lane %d) is not in shared memory", addr, ln))
			return nil
		}
		if w.l.sanitize && !w.race(in, ln, off, 16, write) {
			return nil
		}
		rows[ln] = b
	}
	return rows
}

// matrixWord returns the (row, byte offset) of the two 16-bit elements (low, high) that
// register i of lane l holds of its matrix: row-wise, or column-wise with .trans.
func matrixWord(l int, trans bool) (rowLo, rowHi, off int) {
	if trans {
		return 2 * (l & 3), 2*(l&3) + 1, 2 * (l >> 2)
	}
	return l >> 2, l >> 2, 4 * (l & 3)
}

func execLdmatrix(w *warp, in *dinst, part uint32) {
	rows := w.matrixRows(in, false)
	if rows == nil {
		return
	}
	trans := in.flags&1 != 0
	for i, s := range in.dv {
		for x := part; x != 0; x &= x - 1 {
			l := bits.TrailingZeros32(x)
			lo, hi, off := matrixWord(l, trans)
			var v uint32
			if trans {
				v = uint32(binary.LittleEndian.Uint16(rows[8*i+lo][off:])) | uint32(binary.LittleEndian.Uint16(rows[8*i+hi][off:]))<<16
			} else {
				v = binary.LittleEndian.Uint32(rows[8*i+lo][off:])
			}
			w.r[s+int32(l)] = uint64(v)
		}
	}
}

func execStmatrix(w *warp, in *dinst, part uint32) {
	// Gather every lane's registers first (a row address may point anywhere).
	var vals [4][32]uint32
	for i, s := range in.av {
		for l := 0; l < 32; l++ {
			vals[i][l] = uint32(w.r[s+int32(l)])
		}
	}
	rows := w.matrixRows(in, true)
	if rows == nil {
		return
	}
	trans := in.flags&1 != 0
	for i := range in.av {
		for l := 0; l < 32; l++ {
			if part&(1<<l) == 0 {
				continue
			}
			lo, hi, off := matrixWord(l, trans)
			v := vals[i][l]
			if trans {
				binary.LittleEndian.PutUint16(rows[8*i+lo][off:], uint16(v))
				binary.LittleEndian.PutUint16(rows[8*i+hi][off:], uint16(v>>16))
			} else {
				binary.LittleEndian.PutUint32(rows[8*i+lo][off:], v)
			}
		}
	}
	w.l.progressed()
}

// alignedSync runs a .sync.aligned warp-collective instruction (mma, ldmatrix, stmatrix)
// once all 32 lanes have reached it. The sanitizer reports a partial warp (lanes that
// exited, do not exist or are predicated off) and a diverged warp (lanes waiting at another
// such instruction).
func (w *warp) alignedSync(in *dinst, pc int32, g, m uint32) bool {
	l := w.l
	name := instrText(in.src)
	if i := strings.IndexByte(name, ' '); i > 0 {
		name = name[:i]
	}
	if l.sanitize {
		what := name + " is warp-collective (.sync.aligned): all 32 lanes of the warp must execute it together"
		if m != g && m != 0 {
			w.fault(in, bits.TrailingZeros32(m), KindWarpSync, fmt.Sprintf("%s, but its guard predicate is false in lane(s) %#08x", what, g&^m))
			return true
		}
		if m != 0 {
			if dead := fullMask &^ w.live; dead != 0 {
				why := "have exited"
				if missing := fullMask &^ w.exists; missing != 0 {
					why = fmt.Sprintf("do not exist (the block's %d threads leave warp %d partial)", l.nthreads, w.idx)
					dead = missing
				}
				w.fault(in, bits.TrailingZeros32(m), KindWarpSync, fmt.Sprintf("%s, but lane(s) %#08x %s", what, dead, why))
				return true
			}
			for ln := 0; ln < 32; ln++ {
				if w.st[ln] != lsSync || w.wait[ln] == pc || !l.prog.code[w.wait[ln]].aligned {
					continue
				}
				o := l.prog.code[w.wait[ln]].src
				w.fault(in, bits.TrailingZeros32(m), KindWarpSync, fmt.Sprintf("%s, but the warp diverged: lane(s) %#08x execute it while lane %d waits at %q at %s",
					what, m, ln, instrText(o), posString(o.Pos)))
				return true
			}
		}
	}
	w.setPC(g&^m, pc+1)
	if m == 0 {
		return false
	}
	return w.syncGroup(in, pc, m, fullMask)
}
