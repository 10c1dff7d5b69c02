package collectives

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// fp8Families are the fp8 multimem kernels' families, by the family of the other types.
var fp8Families = map[kernels.Family]kernels.Family{
	kernels.FamilyMMAllReduce1Shot: kernels.FamilyMMAllReduce1ShotFP8,
	kernels.FamilyMMAllReduce2Shot: kernels.FamilyMMAllReduce2ShotFP8,
	kernels.FamilyMMReduceScatter:  kernels.FamilyMMReduceScatterFP8,
}

// reduction is the identity of family fam's kernel reducing dt with op (the fp8 family's for
// fp8 element types).
func reduction(fam kernels.Family, op Op, dt dsl.Type) kernels.ID {
	if f, ok := fp8Families[fam]; ok && isFP8(dt) {
		fam = f
	}
	return kernels.ID{Family: fam, Op: op, DType: dt}
}

// name is the registry name of the kernel id ("" when there is none).
func name(id kernels.ID) string {
	s, err := kernels.Find(id)
	if err != nil {
		return ""
	}
	return s.Name
}
