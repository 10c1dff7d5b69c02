package kernels

import "testing"

// TestGraphFamilies checks that every graph variant is known as one and its base is not.
func TestGraphFamilies(t *testing.T) {
	g, ok := GraphFamily(FamilyP2PAllReduce1Shot)
	if !ok || g != FamilyP2PAllReduce1Shot+"_graph" {
		t.Fatalf("GraphFamily(%s) = %s, %v", FamilyP2PAllReduce1Shot, g, ok)
	}
	for base, variant := range graphFamilies {
		if !IsGraphFamily(variant) {
			t.Errorf("IsGraphFamily(%s) = false, want true", variant)
		}
		if IsGraphFamily(base) {
			t.Errorf("IsGraphFamily(%s) = true for a family with a graph variant", base)
		}
	}
	if _, ok := GraphFamily(g); ok {
		t.Errorf("the graph variant %s has a graph variant", g)
	}
}
