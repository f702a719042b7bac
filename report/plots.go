package report

import (
	"bufio"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// Chart is one rendered plot: its file stem and how many data series it
// drew (legend entries), which tests check against the history.
type Chart struct {
	Name   string
	Title  string
	Series int
	plot   *plot.Plot
	height vg.Length
}

// legendWidth is the strip right of the plot where the legend goes, so it
// never sits on the data.
const legendWidth = 2.3 * vg.Inch

// Save writes the chart as name.png into dir, and as name.svg too when
// vector: the SVG, which zooms, is for the runs a person digs into, and is
// most of a run's size. gonum/plot panics on some degenerate data; that
// becomes an error here, so a chart that cannot be drawn costs the chart,
// not the run.
func (c Chart) Save(dir string, vector bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("report: drawing %s: %v", c.Name, r)
		}
	}()
	exts := []string{"png"}
	if vector {
		exts = append(exts, "svg")
	}
	const width = 10 * vg.Inch
	for _, ext := range exts {
		cw, err := newCanvas(width, c.height, ext)
		if err != nil {
			return fmt.Errorf("report: %s.%s: %w", c.Name, ext, err)
		}
		dc := draw.New(cw)
		legend := c.plot.Legend
		c.plot.Legend = plot.NewLegend()
		c.plot.Draw(draw.Crop(dc, 0, -legendWidth, 0, 0))
		c.plot.Legend = legend
		legend.Left, legend.Top = true, true
		legend.Draw(draw.Crop(dc, width-legendWidth+vg.Points(8), 0, 0, -vg.Points(24)))
		path := filepath.Join(dir, c.Name+"."+ext)
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		_, err = cw.WriteTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("report: %s: %w", path, err)
		}
	}
	return nil
}

// newCanvas is a canvas of w by h that writes itself as ext: gonum's,
// but for PNG, which is written at zlib's fastest level (fastPNG).
func newCanvas(w, h vg.Length, ext string) (vg.CanvasWriterTo, error) {
	if ext == "png" {
		return fastPNG{vgimg.New(w, h)}, nil
	}
	return draw.NewFormattedCanvas(w, h, ext)
}

// fastPNG is gonum's PNG canvas (vgimg.PngCanvas, the same pixels)
// encoded at zlib's fastest level. At the default level the encoding was
// 44% of a matrix's report CPU, which the stories running beside the
// report lose; at the fastest, a matrix's reports took a quarter less
// CPU, for charts 2 to 7% larger.
type fastPNG struct{ *vgimg.Canvas }

func (c fastPNG) WriteTo(w io.Writer) (int64, error) {
	cw := &counter{w: w}
	b := bufio.NewWriter(cw)
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(b, c.Image()); err != nil {
		return cw.n, err
	}
	err := b.Flush()
	return cw.n, err
}

// counter counts the bytes written through it.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

var (
	colorOK   = color.RGBA{R: 0x2b, G: 0x8a, B: 0x3e, A: 0xff}
	colorFail = color.RGBA{R: 0xd0, G: 0x6a, B: 0x00, A: 0xff}
	colorInfo = color.RGBA{R: 0xc9, G: 0x2a, B: 0x2a, A: 0xff}
	// Translucent colours are NRGBA: color.RGBA is alpha-premultiplied.
	colorBand = color.NRGBA{R: 0xf2, G: 0xa0, B: 0x40, A: 0x40}
	colorBad  = color.NRGBA{R: 0xe0, G: 0x10, B: 0x10, A: 0xd0}
	colorTick = color.NRGBA{R: 0x30, G: 0x30, B: 0x30, A: 0x90}
	fColors   = map[string]color.Color{
		history.Acquire: color.RGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff},
		history.Release: color.RGBA{R: 0x7b, G: 0x3f, B: 0xb0, A: 0xff},
		history.Read:    color.RGBA{R: 0x2b, G: 0x8a, B: 0x3e, A: 0xff},
		history.Write:   color.RGBA{R: 0xd0, G: 0x6a, B: 0x00, A: 0xff},
	}
	fShapes = map[string]draw.GlyphDrawer{
		history.Acquire: draw.CircleGlyph{}, history.Release: draw.SquareGlyph{},
		history.Read: draw.TriangleGlyph{}, history.Write: draw.CrossGlyph{},
	}
	clientFs = []string{history.Acquire, history.Release, history.Read, history.Write}
)

func typeColor(t history.Type) color.Color {
	switch t {
	case history.OK:
		return colorOK
	case history.Fail:
		return colorFail
	}
	return colorInfo
}

func newPlot(title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time since start (s)"
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = false
	return p
}

// bands shades nemesis faults across the plot's full height: an orange band
// for a fault that lasted, a thin line for an instant one.
type bands struct{ faults []Fault }

func (b bands) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, f := range b.faults {
		x0, x1 := trX(float64(f.Start)/1e9), trX(float64(f.End)/1e9)
		if x1-x0 < 1.5 {
			x1 = x0 + 1.5
		}
		// A fault that lasts most of the run (a partition set up at the
		// start) is a strip along the top: shaded full height it would
		// hide the short faults the story turns on.
		y0 := c.Min.Y
		if x1-x0 > (c.Max.X-c.Min.X)/2 {
			y0 = c.Max.Y - vg.Points(6)
		}
		c.FillPolygon(colorBand, c.ClipPolygonX([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}}))
	}
}

func addBands(p *plot.Plot, faults []Fault) {
	if len(faults) > 0 {
		p.Add(bands{faults})
		p.Legend.Add("nemesis active", legendBox{colorBand})
	}
}

// legendBox is a filled square in the legend.
type legendBox struct{ color.Color }

func (l legendBox) Thumbnail(c *draw.Canvas) {
	// Inset, so the boxes of neighbouring entries do not run together.
	in := (c.Max.Y - c.Min.Y) / 6
	c.FillPolygon(l.Color, []vg.Point{{X: c.Min.X, Y: c.Min.Y + in}, {X: c.Max.X, Y: c.Min.Y + in}, {X: c.Max.X, Y: c.Max.Y - in}, {X: c.Min.X, Y: c.Max.Y - in}})
}

// Latency is Jepsen's latency-raw graph: every client op at its invoke
// time, its latency on a log scale, shaped by what it did and coloured by
// how it ended.
func Latency(ops []history.Op, faults []Fault) (Chart, error) {
	p := newPlot("Latency of client operations", "latency (ms, log scale)")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	pts := map[string]map[history.Type]plotter.XYs{}
	for _, pr := range history.Pairs(ops) {
		inv, c := pr.Invoke, pr.Completion
		if inv.Process == history.NemesisProcess || c == nil || fColors[inv.F] == nil {
			continue
		}
		if pts[inv.F] == nil {
			pts[inv.F] = map[history.Type]plotter.XYs{}
		}
		ms := math.Max(float64(c.Time-inv.Time)/1e6, 0.001)
		pts[inv.F][c.Type] = append(pts[inv.F][c.Type], plotter.XY{X: float64(inv.Time) / 1e9, Y: ms})
	}
	addBands(p, faults)
	series := 0
	for _, f := range clientFs {
		for _, t := range []history.Type{history.OK, history.Fail, history.Info} {
			xys := thin(pts[f][t], true)
			if len(xys) == 0 {
				continue
			}
			s, err := plotter.NewScatter(xys)
			if err != nil {
				return Chart{}, err
			}
			s.GlyphStyle = draw.GlyphStyle{Color: typeColor(t), Radius: vg.Points(1.6), Shape: fShapes[f]}
			p.Add(s)
			p.Legend.Add(fmt.Sprintf("%s %s", f, t), s)
			series++
		}
	}
	// Time from the start of the run, and room above the slowest op so
	// its glyph is not drawn on the border.
	p.X.Min, p.Y.Max = 0, p.Y.Max*2
	return Chart{Name: "latency", Title: p.Title.Text, Series: series, plot: p, height: 4.5 * vg.Inch}, nil
}

// Throughput is Jepsen's rate graph: completions per second of each kind
// of op and outcome, in buckets of a tenth of a second. Ops are told apart
// by dashes, outcomes by colour: the ok lines of a cycle's four ops run
// together, a burst of failures or unknowns stands out.
func Throughput(ops []history.Op, faults []Fault) (Chart, error) {
	p := newPlot("Throughput", "completions/s")
	const bucket = 0.1
	type kind struct {
		f string
		t history.Type
	}
	counts := map[kind]map[int]int{}
	maxB := 0
	for _, op := range ops {
		if op.Process == history.NemesisProcess || op.Type == history.Invoke || fColors[op.F] == nil {
			continue
		}
		b := int(float64(op.Time) / 1e9 / bucket)
		k := kind{op.F, op.Type}
		if counts[k] == nil {
			counts[k] = map[int]int{}
		}
		counts[k][b]++
		maxB = max(maxB, b)
	}
	// The last bucket is cut short by the end of the run: a rate drawn
	// from it would dip for no reason.
	last := maxB
	if maxB > 0 {
		last = maxB - 1
	}
	addBands(p, faults)
	dashes := map[string][]vg.Length{
		history.Acquire: nil, history.Release: {vg.Points(6), vg.Points(3)},
		history.Read: {vg.Points(1), vg.Points(2)}, history.Write: {vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)},
	}
	// Every cycle completes one op of each kind, so their ok lines run on
	// the same path: drawn from widest and palest to finest and darkest,
	// each stays visible around the next instead of merging into one line.
	widths := map[string]vg.Length{
		history.Acquire: vg.Points(6), history.Release: vg.Points(3.5), history.Read: vg.Points(1.8), history.Write: vg.Points(0.8),
	}
	alphas := map[string]uint8{history.Acquire: 0x50, history.Release: 0x80, history.Read: 0xc0, history.Write: 0xff}
	series := 0
	for _, f := range clientFs {
		for _, t := range []history.Type{history.OK, history.Fail, history.Info} {
			c := counts[kind{f, t}]
			if len(c) == 0 {
				continue
			}
			xys := make(plotter.XYs, last+1)
			for b := 0; b <= last; b++ {
				xys[b] = plotter.XY{X: (float64(b) + 0.5) * bucket, Y: float64(c[b]) / bucket}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return Chart{}, err
			}
			r, g, b, _ := typeColor(t).RGBA()
			col := color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: alphas[f]}
			l.LineStyle = draw.LineStyle{Color: col, Width: widths[f], Dashes: dashes[f]}
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s %s", f, t), l)
			series++
		}
	}
	p.X.Min = 0
	return Chart{Name: "throughput", Title: p.Title.Text, Series: series, plot: p, height: 4 * vg.Inch}, nil
}

// The grid thin draws on: about a glyph's width (3 points on a plot some
// 650 points wide) across and half a glyph's height up, so what it drops
// would have been drawn over a point already there.
const thinCellsX, thinCellsY = 500, 150

// thin keeps one point of xys per cell of a grid finer than the chart's
// pixels (on a log scale for y when logY), the first in the order given: a
// million-op run's chart looks as the whole would, at the size of a short
// run's.
func thin(xys plotter.XYs, logY bool) plotter.XYs {
	if len(xys) < 2 {
		return xys
	}
	y := func(v float64) float64 {
		if logY {
			return math.Log10(v)
		}
		return v
	}
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, p := range xys {
		x0, x1, y0, y1 = math.Min(x0, p.X), math.Max(x1, p.X), math.Min(y0, y(p.Y)), math.Max(y1, y(p.Y))
	}
	cell := func(v, lo, hi float64, n int) int {
		if hi <= lo {
			return 0
		}
		return int((v - lo) / (hi - lo) * float64(n))
	}
	seen := map[[2]int]bool{}
	var out plotter.XYs
	for _, p := range xys {
		k := [2]int{cell(p.X, x0, x1, thinCellsX), cell(y(p.Y), y0, y1, thinCellsY)}
		if !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	return out
}

// mergeHolds joins a process's holds separated by less than gap (ns): bars
// closer than a pixel are drawn as one, so the swimlane of a long run stays
// small and looks the same.
func mergeHolds(holds []checker.Hold, gap int64) []checker.Hold {
	byProc := map[int][]checker.Hold{}
	for _, h := range holds {
		byProc[h.Process] = append(byProc[h.Process], h)
	}
	var out []checker.Hold
	for _, hs := range byProc {
		sort.Slice(hs, func(i, j int) bool { return hs[i].Start < hs[j].Start })
		cur := hs[0]
		for _, h := range hs[1:] {
			if h.Start-cur.End < gap {
				cur.End = max(cur.End, h.End)
				continue
			}
			out = append(out, cur)
			cur = h
		}
		out = append(out, cur)
	}
	return out
}

// swimlanes draws, per process row, green bars while it believed it held
// the key, black ticks at its lease's validity deadline, and red spans
// where its hold overlapped another process's.
type swimlanes struct {
	rows      map[int]float64
	holds     []checker.Hold
	deadlines []plotter.XY
	bad       []checker.Overlap
}

func (s swimlanes) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	bar := func(x0, x1 float64, row float64, h float64, col color.Color) {
		a, b := trX(x0), trX(x1)
		if b-a < 1 {
			b = a + 1
		}
		y0, y1 := trY(row-h), trY(row+h)
		c.FillPolygon(col, c.ClipPolygonXY([]vg.Point{{X: a, Y: y0}, {X: b, Y: y0}, {X: b, Y: y1}, {X: a, Y: y1}}))
	}
	for _, h := range s.holds {
		bar(float64(h.Start)/1e9, float64(h.End)/1e9, s.rows[h.Process], 0.3, colorOK)
	}
	for _, d := range s.deadlines {
		x, y0, y1 := trX(d.X), trY(d.Y-0.15), trY(d.Y+0.15)
		c.StrokeLine2(draw.LineStyle{Color: colorTick, Width: vg.Points(0.6)}, x, y0, x, y1)
	}
	for _, o := range s.bad {
		for _, proc := range []int{o.A, o.B} {
			bar(float64(o.Start)/1e9, float64(o.End)/1e9, s.rows[proc], 0.42, colorBad)
		}
	}
}

func (s swimlanes) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, h := range s.holds {
		xmin, xmax = math.Min(xmin, float64(h.Start)/1e9), math.Max(xmax, float64(h.End)/1e9)
	}
	// Deadlines past the last hold are drawn too, inside the plot.
	for _, d := range s.deadlines {
		xmax = math.Max(xmax, d.X)
	}
	return xmin, xmax, -0.7, float64(len(s.rows)) - 0.3
}

// Holders is the lock-holder swimlane of one key: who believed they held
// it when, the validity deadline of each lease, and every span two
// processes held it at once.
func Holders(ops []history.Op, key string, faults []Fault) (Chart, error) {
	var holds []checker.Hold
	procs := map[int]bool{}
	for _, h := range checker.Holds(ops) {
		if h.Key == key {
			holds = append(holds, h)
			procs[h.Process] = true
		}
	}
	ids := make([]int, 0, len(procs))
	for p := range procs {
		ids = append(ids, p)
	}
	sort.Ints(ids)
	rows := map[int]float64{}
	var ticks []plot.Tick
	for i, id := range ids {
		rows[id] = float64(i)
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: "p" + strconv.Itoa(id)})
	}
	s := swimlanes{rows: rows, holds: holds}
	for _, op := range ops {
		if op.F == history.Acquire && op.Type == history.OK && op.Key == key && op.Value != nil && op.Value.Deadline > 0 {
			if row, ok := rows[op.Process]; ok {
				s.deadlines = append(s.deadlines, plotter.XY{X: float64(op.Value.Deadline) / 1e9, Y: row})
			}
		}
	}
	s.bad = checker.Overlaps(holds)
	if xmin, xmax, _, _ := s.DataRange(); xmax > xmin {
		s.holds = mergeHolds(holds, int64((xmax-xmin)*1e9/thinCellsX))
	}
	s.deadlines = thin(s.deadlines, false)
	p := newPlot(fmt.Sprintf("Who held %q", key), "process")
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	addBands(p, faults)
	p.Add(s)
	p.X.Min = 0
	series := 0
	if len(holds) > 0 {
		p.Legend.Add("believed it held the lock", legendBox{colorOK})
		series++
	}
	if len(s.deadlines) > 0 {
		p.Legend.Add("lease validity deadline", legendBox{colorTick})
		series++
	}
	if len(s.bad) > 0 {
		p.Legend.Add("held by two at once", legendBox{colorBad})
		series++
	}
	height := vg.Length(math.Max(3, 1.2+0.22*float64(len(ids)))) * vg.Inch
	return Chart{Name: "holders-" + fileSafe(key), Title: p.Title.Text, Series: series, plot: p, height: height}, nil
}

// Clocks plots the clock offset of every node and client the nemesis moved,
// as steps over time. ok is false when no clock was touched.
func Clocks(ops []history.Op, faults []Fault) (Chart, bool, error) {
	type step struct {
		t   float64
		off float64
	}
	steps := map[string][]step{}
	var names []string
	// node says which names are nodes' clocks, which a reset puts back
	// (clients' clocks it leaves alone).
	node := map[string]bool{}
	var end float64
	for _, op := range ops {
		end = float64(op.Time) / 1e9
		if op.Process != history.NemesisProcess || op.Type != history.OK {
			continue
		}
		switch f := fault.Op(op.F); f {
		case fault.ClockBump, fault.ClockSkew:
			name := clockName(op)
			if _, seen := steps[name]; !seen {
				names = append(names, name)
				steps[name] = []step{{0, 0}}
				node[name] = f == fault.ClockBump
			}
			steps[name] = append(steps[name], step{float64(op.Time) / 1e9, float64(op.Value.Duration) / 1e9})
		case fault.ClockReset:
			for _, n := range names {
				if node[n] {
					steps[n] = append(steps[n], step{float64(op.Time) / 1e9, 0})
				}
			}
		}
	}
	if len(names) == 0 {
		return Chart{}, false, nil
	}
	p := newPlot("Clock offsets the nemesis set", "offset from real time (s)")
	addBands(p, faults)
	for i, n := range names {
		var xys plotter.XYs
		st := steps[n]
		for j, s := range st {
			if j > 0 {
				xys = append(xys, plotter.XY{X: s.t, Y: st[j-1].off})
			}
			xys = append(xys, plotter.XY{X: s.t, Y: s.off})
		}
		xys = append(xys, plotter.XY{X: end, Y: st[len(st)-1].off})
		l, err := plotter.NewLine(xys)
		if err != nil {
			return Chart{}, false, err
		}
		l.LineStyle.Width = vg.Points(1.5)
		l.LineStyle.Color = palette[i%len(palette)]
		p.Add(l)
		p.Legend.Add(n, l)
	}
	return Chart{Name: "clocks", Title: p.Title.Text, Series: len(names), plot: p, height: 3.5 * vg.Inch}, true, nil
}

// clockName names the clock a clock op moved, for the legend: the node
// ("n3"), or the client ("client c0"). An op recorded before sites is
// named by its target, which for these ops is the node or the client.
func clockName(op history.Op) string {
	s := op.Site()
	name := s.Node
	if fault.Op(op.F) == fault.ClockSkew {
		name = s.Peer
	}
	if op.Value == nil || op.Value.Site == nil {
		name = target(op)
	}
	if fault.Op(op.F) == fault.ClockSkew {
		return "client " + name
	}
	return name
}

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff}, color.RGBA{R: 0xc9, G: 0x2a, B: 0x2a, A: 0xff},
	color.RGBA{R: 0x2b, G: 0x8a, B: 0x3e, A: 0xff}, color.RGBA{R: 0x7b, G: 0x3f, B: 0xb0, A: 0xff},
	color.RGBA{R: 0xd0, G: 0x6a, B: 0x00, A: 0xff},
}

func fileSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Charts builds every chart a run has: latency, throughput, a holder
// swimlane per lock key, and clock offsets when clocks were moved.
func Charts(ops []history.Op) ([]Chart, error) {
	faults := Faults(ops)
	var out []Chart
	lat, err := Latency(ops, faults)
	if err != nil {
		return nil, err
	}
	thr, err := Throughput(ops, faults)
	if err != nil {
		return nil, err
	}
	out = append(out, lat, thr)
	var keys []string
	seen := map[string]bool{}
	for _, op := range ops {
		if op.F == history.Acquire && op.Key != "" && !seen[op.Key] {
			seen[op.Key] = true
			keys = append(keys, op.Key)
		}
	}
	for _, k := range keys {
		h, err := Holders(ops, k, faults)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	if c, ok, err := Clocks(ops, faults); err != nil {
		return nil, err
	} else if ok {
		out = append(out, c)
	}
	return out, nil
}
