package ops

import "github.com/kgen-dev/kgen/ptx"

func ptxTarget(s string) ptx.Target { return ptx.Target(s) }

// planNames lists the kernels of d's plans.
func planNames(d interface{}) []string {
	var names []string
	devices.Range(func(k, v any) bool {
		if k == d {
			st := v.(*devState)
			st.mu.Lock()
			for _, p := range st.plans {
				names = append(names, p.name)
			}
			st.mu.Unlock()
		}
		return true
	})
	return names
}
