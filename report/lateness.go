package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/lateness"
)

// latenessFloor is the least lateness drawn, in ms: a window that woke on
// time has lateness 0, which a log scale cannot show, and below 10 µs the
// scheduler's noise says nothing anyway.
const latenessFloor = 0.01

// latenessLabels bounds how many fault samples are named on the chart: a
// random run's dozens of faults would bury each other's names, and the
// worst ones are those a reader looks for.
const latenessLabels = 8

// latenessCells is how many x cells each line keeps its worst window of:
// a few per pixel, so an hour's run draws what a minute's would, peaks
// included (a thinned line that dropped a peak would hide a starving).
const latenessCells = 1500

// Lateness charts how late the harness ran through a run: the worst timer
// and reply lateness of each window as lines, each pause's and restart's
// overrun as a named point, and the limits at ttl past which the run is
// starved (for timers and replies, a pause's overrun and a restart; none
// when ttl is zero) as dashed lines, so a starved verdict can be seen
// against the faults it fell among. ok is false when nothing was measured (a run cut short
// before its clients were up).
func Lateness(samples []lateness.Sample, lim lateness.Limits, faults []Fault) (Chart, bool, error) {
	if len(samples) == 0 {
		return Chart{}, false, nil
	}
	m := measure(samples, faults)
	p := newPlot("How late the harness ran", "lateness (ms, log scale)")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	addBands(p, faults)
	lines, err := addLatenessLines(p, m.windows, m.xmax)
	if err != nil {
		return Chart{}, false, err
	}
	points, err := addOverruns(p, m.overruns, m.xmax)
	if err != nil {
		return Chart{}, false, err
	}
	limits, top, err := addLimits(p, lim, m.xmax)
	if err != nil {
		return Chart{}, false, err
	}
	// From the start of the run, with room above the limit line and the
	// worst point so neither sits on the border.
	p.X.Min, p.X.Max, p.Y.Max = 0, math.Max(m.xmax, p.X.Max), math.Max(m.ymax, top)*3
	p.Y.Min = math.Min(p.Y.Min, latenessFloor)
	return Chart{Name: "lateness", Title: p.Title.Text, Series: lines + points + limits, plot: p, height: 3.5 * vg.Inch}, true, nil
}

// lateMs is a lateness in ms as drawn: never below latenessFloor.
func lateMs(ns int64) float64 { return math.Max(float64(ns)/1e6, latenessFloor) }

// measured is a run's lateness samples sorted for the chart.
type measured struct {
	windows    map[lateness.Kind]plotter.XYs // the windows' samples (s, ms), by kind
	overruns   []lateness.Sample             // the faults' samples
	xmax, ymax float64                       // the last sample or fault's end (s), the worst lateness (ms)
}

// measure sorts samples into windows and overruns, and finds how far
// they and faults reach.
func measure(samples []lateness.Sample, faults []Fault) measured {
	m := measured{windows: map[lateness.Kind]plotter.XYs{}, ymax: latenessFloor}
	for _, s := range samples {
		x := float64(s.At) / 1e9
		if !s.Kind.Load() {
			continue // the summary line says it
		}
		m.xmax, m.ymax = math.Max(m.xmax, x), math.Max(m.ymax, lateMs(s.Late))
		if s.Kind.FromHistory() {
			m.overruns = append(m.overruns, s)
			continue
		}
		m.windows[s.Kind] = append(m.windows[s.Kind], plotter.XY{X: x, Y: lateMs(s.Late)})
	}
	for _, f := range faults {
		m.xmax = math.Max(m.xmax, float64(f.End)/1e9)
	}
	return m
}

// addLatenessLines draws the timers' and the replies' windows as lines,
// each thinned to its peaks, and returns how many it drew.
func addLatenessLines(p *plot.Plot, windows map[lateness.Kind]plotter.XYs, xmax float64) (int, error) {
	series := 0
	lines := []struct {
		kind  lateness.Kind
		label string
	}{
		{lateness.Timer, "harness timers"},
		{lateness.Reply, "a node's replies"},
		{lateness.Server, "the lock's server"},
		{lateness.Worker, "a worker's wait for a core, over a TTL"},
	}
	for i, k := range lines {
		xys := windows[k.kind]
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(peaks(xys, xmax))
		if err != nil {
			return 0, err
		}
		l.LineStyle = draw.LineStyle{Color: palette[[]int{0, 2, 4, 3}[i]], Width: vg.Points(1)}
		p.Add(l)
		p.Legend.Add(k.label, l)
		series++
	}
	return series, nil
}

// addOverruns draws the faults' overruns as points, the worst of them
// named, and returns how many series it drew (none without overruns).
func addOverruns(p *plot.Plot, fs []lateness.Sample, xmax float64) (int, error) {
	if len(fs) == 0 {
		return 0, nil
	}
	var xys plotter.XYs
	for _, s := range fs {
		xys = append(xys, plotter.XY{X: float64(s.At) / 1e9, Y: lateMs(s.Late)})
	}
	sc, err := plotter.NewScatter(xys)
	if err != nil {
		return 0, err
	}
	sc.GlyphStyle = draw.GlyphStyle{Color: palette[1], Radius: vg.Points(3), Shape: draw.PyramidGlyph{}}
	p.Add(sc)
	p.Legend.Add("a fault's overrun", sc)
	if err := labelFaults(p, fs, lateMs, xmax); err != nil {
		return 0, err
	}
	return 1, nil
}

// limitLine is one limit past which a run is starved, as a dashed line.
type limitLine struct {
	at    time.Duration
	label string
	dash  vg.Length
}

// addLimits draws lim's limits (those set) as dashed lines across the
// chart, and returns how many it drew and the highest (ms; 0 if none).
func addLimits(p *plot.Plot, lim lateness.Limits, xmax float64) (int, float64, error) {
	limits := []limitLine{{lim.Timer, "starved above (timers, replies)", vg.Points(6)}}
	if lim.Reply != lim.Timer {
		// The lock bounds its own replies more tightly than the TTL does.
		limits = []limitLine{{lim.Timer, "starved above (timers)", vg.Points(6)}, {lim.Reply, "starved above (replies: the lock's bound)", vg.Points(10)}}
	}
	limits = append(limits, limitLine{lim.Pause, "starved above (a pause's overrun)", vg.Points(3)},
		limitLine{lim.Fault, "starved above (a restart)", vg.Points(2)})
	series, top := 0, 0.0
	for _, lim := range limits {
		if lim.at <= 0 {
			continue
		}
		y := float64(lim.at) / 1e6
		if err := addLimit(p, lim, y, xmax); err != nil {
			return 0, 0, err
		}
		series++
		top = math.Max(top, y)
	}
	return series, top, nil
}

// addLimit draws one limit at y ms, with its value written on its line: a
// log axis does not let a reader read it off.
func addLimit(p *plot.Plot, lim limitLine, y, xmax float64) error {
	l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: y}, {X: xmax, Y: y}})
	if err != nil {
		return err
	}
	l.LineStyle = draw.LineStyle{Color: colorBad, Width: vg.Points(1.2), Dashes: []vg.Length{lim.dash, vg.Points(4)}}
	p.Add(l)
	p.Legend.Add(lim.label, l)
	v, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: 0, Y: y}}, Labels: []string{lim.at.String()}})
	if err != nil {
		return err
	}
	v.TextStyle[0].Font.Size, v.TextStyle[0].Color = vg.Points(8), colorBad
	v.Offset = vg.Point{X: vg.Points(3), Y: vg.Points(2)}
	p.Add(v)
	return nil
}

// labelFaults names the worst fault samples beside their points; a name
// near the right edge is set to the left of its point, so it stays out of
// the legend's strip.
func labelFaults(p *plot.Plot, fs []lateness.Sample, ms func(int64) float64, xmax float64) error {
	worst := slices.SortedFunc(slices.Values(fs), func(a, b lateness.Sample) int { return cmp.Compare(b.Late, a.Late) })
	worst = worst[:min(len(worst), latenessLabels)]
	var left, right plotter.XYLabels
	for _, s := range worst {
		xy := plotter.XY{X: float64(s.At) / 1e9, Y: ms(s.Late)}
		name := fmt.Sprintf("%s: %s", s.What, fmtLate(time.Duration(s.Late)))
		if xy.X > 0.7*xmax {
			left.XYs, left.Labels = append(left.XYs, xy), append(left.Labels, name)
		} else {
			right.XYs, right.Labels = append(right.XYs, xy), append(right.Labels, name)
		}
	}
	for _, side := range []struct {
		l     plotter.XYLabels
		align text.XAlignment
		dx    vg.Length
	}{{right, text.XLeft, vg.Points(5)}, {left, text.XRight, -vg.Points(5)}} {
		if len(side.l.XYs) == 0 {
			continue
		}
		ls, err := plotter.NewLabels(side.l)
		if err != nil {
			return err
		}
		for i := range ls.TextStyle {
			ls.TextStyle[i].XAlign, ls.TextStyle[i].YAlign = side.align, text.YCenter
			ls.TextStyle[i].Font.Size = vg.Points(8)
			ls.TextStyle[i].Color = palette[1]
		}
		ls.Offset = vg.Point{X: side.dx}
		p.Add(ls)
	}
	return nil
}

// peaks keeps the worst point of each of latenessCells slices of [0, xmax],
// in x order.
func peaks(xys plotter.XYs, xmax float64) plotter.XYs {
	xys = slices.Clone(xys)
	slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	if len(xys) <= latenessCells || xmax <= 0 {
		return xys
	}
	var out plotter.XYs
	last := -1
	for _, p := range xys {
		c := int(p.X / xmax * latenessCells)
		if c != last || len(out) == 0 {
			out = append(out, p)
			last = c
			continue
		}
		if p.Y > out[len(out)-1].Y {
			out[len(out)-1] = p
		}
	}
	return out
}

// latenessChart is r's lateness chart, if it measured any.
func latenessChart(r *engine.Result, faults []Fault) (Chart, bool, error) {
	return Lateness(r.Lateness, r.Limits, faults)
}

// latenessLine is the worst lateness of each kind in a few words, with the
// limit: what a reader checks before trusting a verdict that rests on
// timing.
func latenessLine(r *engine.Result) string {
	if len(r.Lateness) == 0 {
		return "not measured"
	}
	worst := lateness.Worst(r.Lateness)
	var parts []string
	for _, k := range []struct {
		kind lateness.Kind
		say  string // the words around the figure
		// optional: measured only in some runs, and else no word in the
		// line (a lock's own server: not Redis, no fault touches its
		// process; a worker's wait: the clients are worker processes).
		optional bool
	}{
		{lateness.Timer, "timers %s", false}, {lateness.Reply, "replies %s", false},
		{lateness.Server, "server %s", true}, {lateness.Worker, "workers waited %s a TTL (unjudged)", true},
		// Noted only where the wall clock moved (lateness.WallNoise).
		{lateness.Wall, "wall clock moved %s", true},
		{lateness.Pause, "pauses %s", false}, {lateness.Fault, "restarts/saves %s", false},
	} {
		d, ok := worst[k.kind]
		switch {
		case ok:
			parts = append(parts, fmt.Sprintf(k.say, fmtLate(d)))
		case !k.optional:
			// A kind with no sample was not measured (no probe node, no
			// fault with work of its own): "0s" would claim it was on time.
			parts = append(parts, fmt.Sprintf(k.say, "–"))
		}
	}
	// The limits of the kinds measured only in some runs.
	optional := ""
	if _, ok := worst[lateness.Server]; ok {
		optional = fmt.Sprintf(", server %s", r.Limits.Server)
	}
	if _, ok := worst[lateness.Wall]; ok {
		optional += fmt.Sprintf(", wall clock %s", r.Limits.Wall)
	}
	line := strings.Join(parts, ", ")
	switch lim := r.Limits; {
	case lim == lateness.Limits{}:
		// Not judged: no limits to show.
	case lim.Reply != lim.Timer:
		line += fmt.Sprintf(" (limits: timers %s, replies %s%s, pauses %s, restarts/saves %s)", lim.Timer, lim.Reply, optional, lim.Pause, lim.Fault)
	default:
		line += fmt.Sprintf(" (limits: %s%s, pauses %s, restarts/saves %s)", lim.Timer, optional, lim.Pause, lim.Fault)
	}
	return line
}

// fmtLate rounds a lateness to what a reader compares with a limit of
// tens of ms or more: whole ms from 10 ms, a tenth of one below, and µs
// under a millisecond.
func fmtLate(d time.Duration) string {
	switch {
	case d >= 10*time.Millisecond:
		d = d.Round(time.Millisecond)
	case d >= time.Millisecond:
		d = d.Round(100 * time.Microsecond)
	default:
		d = d.Round(time.Microsecond)
	}
	return d.String()
}
