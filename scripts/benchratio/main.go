// Command benchratio reads `go test -bench` output on stdin and prints, for every benchmark, the
// median of each ratio metric it reported (units starting with "x-", and first-token-us) over the
// runs: the figures docs/performance.md quotes. `make bench-controller` pipes into it. With -all,
// every metric but the time and allocations per operation (counts and ratios reported with
// b.ReportMetric: `make bench-jobs`).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	all := flag.Bool("all", false, "every reported metric, not only ratios")
	flag.Parse()
	type key struct{ bench, unit string }
	values := map[key][]float64{}
	var order []key
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 { // drop the -GOMAXPROCS suffix
			name = name[:i]
		}
		for i := 2; i+1 < len(f); i += 2 {
			unit := f[i+1]
			ratio := strings.HasPrefix(unit, "x-") || unit == "first-token-us"
			if !ratio && (!*all || unit == "ns/op" || unit == "B/op" || unit == "allocs/op") {
				continue
			}
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			k := key{name, unit}
			if _, seen := values[k]; !seen {
				order = append(order, k)
			}
			values[k] = append(values[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(2)
	}
	if len(order) == 0 {
		fmt.Fprintln(os.Stderr, "benchratio: no ratio metrics in the input")
		os.Exit(1)
	}
	fmt.Println("| benchmark | metric | median | range | runs |")
	fmt.Println("|---|---|---|---|---|")
	for _, k := range order {
		v := slices.Clone(values[k])
		slices.Sort(v)
		m := v[len(v)/2]
		if len(v)%2 == 0 {
			m = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		fmt.Printf("| %s | %s | %.3g | %.3g–%.3g | %d |\n", strings.TrimPrefix(k.bench, "Benchmark"), k.unit, m, v[0], v[len(v)-1], len(v))
	}
}
