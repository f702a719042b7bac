package sweep

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot draws P(measure) against the parameter, one line per lock and
// measure with its 95% Wilson interval as error bars, and the story's
// threshold as a dashed line, to path.png and path.svg.
func (sw *Sweep) Plot(path string) (err error) {
	defer func() {
		// gonum/plot panics on some degenerate data (one point, say).
		if r := recover(); r != nil {
			err = fmt.Errorf("sweep: drawing %s: %v", path, r)
		}
	}()
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: P(violation) against %s (%d run(s) a point, 95%% Wilson intervals)", sw.Story, sw.Param.Name, sw.Runs)
	p.X.Label.Text = fmt.Sprintf("%s (%s)", sw.Param.Name, sw.Param.Unit)
	p.Y.Label.Text = "P"
	p.Y.Min, p.Y.Max = -0.03, 1.03
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	style := 0
	for _, l := range sw.Locks {
		for mi, m := range Measures {
			var pts plotter.XYs
			var errs plotter.YErrors
			for _, v := range sw.Spec.Values() {
				c := sw.Cells[cellKey(l, v)]
				if c.Judged == 0 {
					continue
				}
				k := c.count(m)
				lo, hi := Wilson(k, c.Judged)
				pv := float64(k) / float64(c.Judged)
				pts = append(pts, plotter.XY{X: v, Y: pv})
				errs = append(errs, struct{ Low, High float64 }{pv - lo, hi - pv})
			}
			if len(pts) == 0 {
				continue
			}
			if err := curve(p, pts, errs, plotutil.Color(style), mi == 1, fmt.Sprintf("%s: %s", l, m)); err != nil {
				return err
			}
			style++
		}
	}
	if err := sw.frame(p, -0.03, 1.03); err != nil {
		return err
	}
	return save(p, path)
}

// frame marks the parameter's threshold, where it has one, as a dashed
// line from ylo to yhi, and spans the x axis over the range and it.
func (sw *Sweep) frame(p *plot.Plot, ylo, yhi float64) error {
	if t := sw.Param.Threshold; t > 0 {
		th, err := plotter.NewLine(plotter.XYs{{X: t, Y: ylo}, {X: t, Y: yhi}})
		if err != nil {
			return err
		}
		th.Color = color.Gray{Y: 0x60}
		th.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(th)
		p.Legend.Add(fmt.Sprintf("threshold: %s = %g %s", sw.Param.Name, t, sw.Param.Unit), th)
	}
	pad := (sw.Spec.To - sw.Spec.From) * 0.04
	p.X.Min, p.X.Max = sw.Spec.From-pad, sw.Spec.To+pad
	if t := sw.Param.Threshold; t > 0 {
		p.X.Min, p.X.Max = math.Min(p.X.Min, t-pad), math.Max(p.X.Max, t+pad)
	}
	return nil
}

// curve adds one line of points with their error bars in col to p, and
// names it in the legend: dashed, with square points, when it is the
// second of a pair, so the pair reads apart in one colour.
func curve(p *plot.Plot, pts plotter.XYs, errs plotter.YErrors, col color.Color, second bool, label string) error {
	ln, sc, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	ln.Color, sc.Color = col, col
	sc.Shape = draw.CircleGlyph{}
	if second {
		sc.Shape = draw.SquareGlyph{}
		ln.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	eb, err := plotter.NewYErrorBars(struct {
		plotter.XYer
		plotter.YErrorer
	}{pts, errs})
	if err != nil {
		return err
	}
	eb.Color = col
	p.Add(ln, sc, eb)
	p.Legend.Add(label, ln, sc)
	return nil
}

// save writes p to path.png and path.svg.
func save(p *plot.Plot, path string) error {
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(9*vg.Inch, 5*vg.Inch, path+"."+ext); err != nil {
			return err
		}
	}
	return nil
}

// PlotFigures draws what the runs cost against the parameter: the mean
// fraction of acknowledged writes lost (solid) and of the run's time with
// two holders (dashed), one colour per lock, with their 95% Student-t
// intervals as error bars, and the threshold as Plot marks it, to
// path.png and path.svg. Its y axis ends a little above the highest
// interval, since a lost fraction of 0.01 would be flat on one of 0..1.
func (sw *Sweep) PlotFigures(path string) (err error) {
	defer func() {
		// As Plot's: gonum/plot panics on some degenerate data.
		if r := recover(); r != nil {
			err = fmt.Errorf("sweep: drawing %s: %v", path, r)
		}
	}()
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: writes lost and time double-held against %s (%d run(s) a point, 95%% Student-t intervals)", sw.Story, sw.Param.Name, sw.Runs)
	p.X.Label.Text = fmt.Sprintf("%s (%s)", sw.Param.Name, sw.Param.Unit)
	p.Y.Label.Text = "fraction (of acknowledged writes; of the run's time)"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	top := 0.01
	for li, l := range sw.Locks {
		for fi, fr := range fractions {
			var pts plotter.XYs
			var errs plotter.YErrors
			for _, v := range sw.Spec.Values() {
				m, lo, hi := MeanInterval(sw.Cells[cellKey(l, v)].values(fr))
				if math.IsNaN(m) {
					continue
				}
				pts = append(pts, plotter.XY{X: v, Y: m})
				errs = append(errs, struct{ Low, High float64 }{m - lo, hi - m})
				top = max(top, hi)
			}
			if len(pts) == 0 {
				continue
			}
			if err := curve(p, pts, errs, plotutil.Color(li), fi == 1, fmt.Sprintf("%s: %s", l, fr.name)); err != nil {
				return err
			}
		}
	}
	p.Y.Min, p.Y.Max = -0.03*top, 1.03*top
	if err := sw.frame(p, p.Y.Min, p.Y.Max); err != nil {
		return err
	}
	return save(p, path)
}
