package sweep

import (
	"fmt"
	"math"

	"github.com/locktorture/locktorture/verdict"
)

// t975 are Student's t at 0.975 for 1 to 30 degrees of freedom: the
// half-width of a two-sided 95% interval, in standard errors.
var t975 = [...]float64{12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
	2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
	2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423}

// TCritical is t975 for df degrees of freedom, and the normal's 1.96
// beyond 30, where the two differ by under 5%.
func TCritical(df int) float64 {
	if df >= 1 && df <= len(t975) {
		return t975[df-1]
	}
	return 1.959963984540054
}

// MeanInterval is the mean of the fractions xs and its 95% Student-t
// interval, clipped to [0, 1]: a sweep has a few runs a point, too few
// for the normal's. One run has no spread to draw an interval from, so
// its interval is [0, 1], claiming nothing one run cannot show; no run
// has a NaN mean.
func MeanInterval(xs []float64) (mean, lo, hi float64) {
	n := len(xs)
	if n == 0 {
		return math.NaN(), 0, 1
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(n)
	if n == 1 {
		return mean, 0, 1
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	half := TCritical(n-1) * math.Sqrt(ss/float64(n-1)/float64(n))
	return mean, max(0, mean-half), min(1, mean+half)
}

// fraction is one of a run's figures that a sweep gives the mean and
// interval of, per lock and point.
type fraction struct {
	name string
	of   func(verdict.Figures) float64
}

// fractions are those figures, as the table and the figures' plot name
// them.
var fractions = []fraction{
	{"lost writes", func(f verdict.Figures) float64 { return f.LostFraction }},
	{"double-held time", func(f verdict.Figures) float64 { return f.DoubleHeldFraction }},
}

// values are the cell's runs' values of fr.
func (c Cell) values(fr fraction) []float64 {
	out := make([]float64, len(c.Figures))
	for i, f := range c.Figures {
		out[i] = fr.of(f)
	}
	return out
}

// meanEpisodes is the mean of the cell's runs' episodes of two holders
// (NaN with none).
func (c Cell) meanEpisodes() float64 {
	if len(c.Figures) == 0 {
		return math.NaN()
	}
	var sum int
	for _, f := range c.Figures {
		sum += f.Episodes
	}
	return float64(sum) / float64(len(c.Figures))
}

// figureCells are the table's cells for c's fractions and episodes: "–"
// where no run had figures (a sweep.json from before they were kept).
func (c Cell) figureCells() []string {
	var out []string
	for _, fr := range fractions {
		m, lo, hi := MeanInterval(c.values(fr))
		if math.IsNaN(m) {
			out = append(out, "–")
			continue
		}
		out = append(out, fmt.Sprintf("%.3f [%.3f, %.3f]", m, lo, hi))
	}
	if e := c.meanEpisodes(); !math.IsNaN(e) {
		return append(out, fmt.Sprintf("%.1f", e))
	}
	return append(out, "–")
}
