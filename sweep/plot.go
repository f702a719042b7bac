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
			col := plotutil.Color(style)
			ln, sc, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			ln.Color, sc.Color = col, col
			sc.Shape = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}}[mi%2]
			if mi == 1 {
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
			p.Legend.Add(fmt.Sprintf("%s: %s", l, m), ln, sc)
			style++
		}
	}
	if t := sw.Param.Threshold; t > 0 {
		th, err := plotter.NewLine(plotter.XYs{{X: t, Y: -0.03}, {X: t, Y: 1.03}})
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
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(9*vg.Inch, 5*vg.Inch, path+"."+ext); err != nil {
			return err
		}
	}
	return nil
}
