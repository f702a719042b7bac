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
func (sw *Sweep) Plot(path string) error {
	title := fmt.Sprintf("%s: P(violation) against %s (%d run(s) a point, 95%% Wilson intervals)", sw.Story, sw.Param.Name, sw.Runs)
	return sw.draw(path, title, "P", func(p *plot.Plot) (ylo, yhi float64, err error) {
		style := 0
		for _, l := range sw.Locks {
			for mi, m := range Measures {
				drawn, err := sw.series(p, l, plotutil.Color(style), mi == 1, fmt.Sprintf("%s: %s", l, m), func(c Cell) (y, lo, hi float64, ok bool) {
					if c.Judged == 0 {
						return 0, 0, 0, false
					}
					k := c.count(m)
					lo, hi = Wilson(k, c.Judged)
					return float64(k) / float64(c.Judged), lo, hi, true
				})
				if err != nil {
					return 0, 0, err
				}
				if drawn {
					style++
				}
			}
		}
		return -0.03, 1.03, nil
	})
}

// series draws one curve of lock l: at each point of the range where at
// gives a value for the lock's cell, the value with its interval as an
// error bar. It says whether there was a point to draw.
func (sw *Sweep) series(p *plot.Plot, l string, col color.Color, second bool, label string, at func(Cell) (y, lo, hi float64, ok bool)) (bool, error) {
	var pts plotter.XYs
	var errs plotter.YErrors
	for _, v := range sw.Spec.Values() {
		y, lo, hi, ok := at(sw.Cells[cellKey(l, v)])
		if !ok {
			continue
		}
		pts = append(pts, plotter.XY{X: v, Y: y})
		errs = append(errs, struct{ Low, High float64 }{y - lo, hi - y})
	}
	if len(pts) == 0 {
		return false, nil
	}
	return true, curve(p, pts, errs, col, second, label)
}

// draw draws a plot of the sweep to path.png and path.svg: its title and
// labels, a grid and a legend, what fill adds (which says how far the y
// axis goes), and the frame. gonum/plot panics on some degenerate data
// (one point, say), which comes back as an error.
func (sw *Sweep) draw(path, title, ylabel string, fill func(*plot.Plot) (ylo, yhi float64, err error)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sweep: drawing %s: %v", path, r)
		}
	}()
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = fmt.Sprintf("%s (%s)", sw.Param.Name, sw.Param.Unit)
	p.Y.Label.Text = ylabel
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	ylo, yhi, err := fill(p)
	if err != nil {
		return err
	}
	p.Y.Min, p.Y.Max = ylo, yhi
	if err := sw.frame(p, ylo, yhi); err != nil {
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
func (sw *Sweep) PlotFigures(path string) error {
	title := fmt.Sprintf("%s: writes lost and time double-held against %s (%d run(s) a point, 95%% Student-t intervals)", sw.Story, sw.Param.Name, sw.Runs)
	return sw.draw(path, title, "fraction (of acknowledged writes; of the run's time)", func(p *plot.Plot) (ylo, yhi float64, err error) {
		top := 0.01
		for li, l := range sw.Locks {
			for fi, fr := range fractions {
				_, err := sw.series(p, l, plotutil.Color(li), fi == 1, fmt.Sprintf("%s: %s", l, fr.name), func(c Cell) (y, lo, hi float64, ok bool) {
					y, lo, hi = MeanInterval(c.values(fr))
					if math.IsNaN(y) {
						return 0, 0, 0, false
					}
					top = max(top, hi)
					return y, lo, hi, true
				})
				if err != nil {
					return 0, 0, err
				}
			}
		}
		return -0.03 * top, 1.03 * top, nil
	})
}
