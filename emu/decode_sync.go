package emu

// Synchronization: barriers and warp-synchronous instructions (shfl, vote, redux, match, elect).

import (
	"errors"

	"github.com/kgen-dev/kgen/ptx"
)

func (d *decoder) decodeBar(di *dinst, in *ptx.Instr, toks tokens) error {
	args := in.Args
	if toks.has("warp") { // bar.warp.sync membermask
		if len(args) != 1 {
			return errors.New("bar.warp.sync takes a member mask")
		}
		var err error
		if di.e, err = d.src(args[0], ptx.B32); err != nil {
			return err
		}
		di.kind = ctlWarpSync
		di.exec = execWarpBar
		di.anyPC = true
		return nil
	}
	if toks.has("cluster") { // barrier.cluster (cluster.go)
		switch {
		case toks.has("arrive"):
			di.exec = execClusterArrive
		case toks.has("wait"):
			di.kind = ctlClusterWait
		default:
			return errUnsupported
		}
		return nil
	}
	di.kind = ctlBar
	switch {
	case toks.has("arrive"):
		di.op = barArrive
	case toks.has("red"):
		di.op = barRed
	case toks.has("sync") || toks[0] == "bar" && len(toks) == 1:
		di.op = barSync
	default:
		return errUnsupported
	}
	var err error
	if di.op == barRed {
		switch toks.any("popc", "and", "or") {
		case "popc":
			di.imm = uint64(redPopc)
		case "and":
			di.imm = uint64(redAnd)
		case "or":
			di.imm = uint64(redOr)
		default:
			return errUnsupported
		}
		if len(args) < 3 {
			return errors.New("bar.red takes d, a{, b}, {!}c")
		}
		var m uint64
		if di.d, m, err = d.dst(args[0]); err != nil {
			return err
		}
		di.dmask = []uint64{m}
		neg := false
		if di.c, neg, err = d.pred(args[len(args)-1]); err != nil {
			return err
		}
		if neg {
			di.flags |= 1
		}
		args = args[1 : len(args)-1]
	}
	if len(args) < 1 || len(args) > 2 {
		return errors.New("a barrier takes an id and an optional thread count")
	}
	if di.a, err = d.src(args[0], ptx.U32); err != nil {
		return err
	}
	if len(args) == 2 {
		if di.b, err = d.src(args[1], ptx.U32); err != nil {
			return err
		}
		if _, imm := args[1].(ptx.Imm); !imm {
			di.flags |= barRegCount // ptx.Verify checks an immediate count; a register's at run time
		}
	}
	return nil
}

func (d *decoder) decodeWarp(di *dinst, in *ptx.Instr, toks tokens) error {
	args := in.Args
	t := in.Type()
	if !toks.has("sync") {
		return errors.New("the non-.sync form (removed for sm_70+)")
	}
	if len(args) < 2 {
		return errors.New("missing operands")
	}
	di.kind = ctlWarpSync
	var err error
	if di.e, err = d.src(args[len(args)-1], ptx.B32); err != nil {
		return err
	}
	switch toks[0] {
	case "shfl":
		var extra []ptx.Operand
		if len(args) == 6 { // d, p, a, b, c, mask
			extra, args = args[1:2], append(args[:1:1], args[2:]...)
		}
		if len(args) != 5 {
			return errors.New("shfl.sync takes d[|p], a, b, c, membermask")
		}
		if di.d, _, di.d2, err = d.dst2(args[0], extra...); err != nil {
			return err
		}
		if di.a, err = d.src(args[1], ptx.B32); err != nil {
			return err
		}
		if di.b, err = d.src(args[2], ptx.B32); err != nil {
			return err
		}
		if di.c, err = d.src(args[3], ptx.B32); err != nil {
			return err
		}
		switch toks.any("up", "down", "bfly", "idx") {
		case "up":
			di.op = shflUp
		case "down":
			di.op = shflDown
		case "bfly":
			di.op = shflBfly
		case "idx":
			di.op = shflIdx
		default:
			return errUnsupported
		}
		di.exec = execShfl
	case "vote":
		if len(args) != 3 {
			return errors.New("vote.sync takes d, {!}a, membermask")
		}
		if di.d, _, err = d.dst(args[0]); err != nil {
			return err
		}
		neg := false
		if di.a, neg, err = d.pred(args[1]); err != nil {
			return err
		}
		if neg {
			di.flags |= 1
		}
		switch toks.any("all", "any", "uni", "ballot") {
		case "all":
			di.op = voteAll
		case "any":
			di.op = voteAny
		case "uni":
			di.op = voteUni
		case "ballot":
			di.op = voteBallot
		default:
			return errUnsupported
		}
		di.exec = execVote
	case "redux":
		if len(args) != 3 {
			return errors.New("redux.sync takes d, a, membermask")
		}
		opn := toks.any("add", "min", "max", "and", "or", "xor")
		if opn == "" {
			return errUnsupported
		}
		di.op = atomOps[opn]
		if toks.has("abs") {
			di.flags |= 4
		}
		if toks.has("NaN") {
			di.flags |= 8
		}
		if di.d, _, err = d.dst(args[0]); err != nil {
			return err
		}
		if di.a, err = d.src(args[1], t); err != nil {
			return err
		}
		di.exec = execRedux
	case "match":
		var extra []ptx.Operand
		if len(args) == 4 { // d, p, a, mask
			extra, args = args[1:2], append(args[:1:1], args[2:]...)
		}
		if len(args) != 3 {
			return errors.New("match.sync takes d[|p], a, membermask")
		}
		if di.d, _, di.d2, err = d.dst2(args[0], extra...); err != nil {
			return err
		}
		if di.a, err = d.src(args[1], t); err != nil {
			return err
		}
		if toks.has("all") {
			di.op = 1
		}
		di.exec = execMatch
	case "elect":
		var extra []ptx.Operand
		if len(args) == 3 {
			extra, args = args[1:2], append(args[:1:1], args[2:]...)
		}
		if di.d, _, di.d2, err = d.dst2(args[0], extra...); err != nil {
			return err
		}
		di.exec = execElect
	default:
		return errUnsupported
	}
	return nil
}
