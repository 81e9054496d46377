// A time-series chart on uPlot (canvas; small and fast enough to redraw on
// every live update). Colours come from the theme's CSS variables.

import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { useTheme } from "../lib/theme";
import { isolatedPoints } from "../lib/series";

export interface Series {
  label: string;
  color: string; // a CSS variable name, e.g. "--good"
  values: (number | null)[];
  fill?: boolean;
}

interface Props {
  title: string;
  /** x: unix seconds. */
  x: number[];
  series: Series[];
  unit?: string;
  height?: number;
  yMax?: number;
}

function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
}

export function Chart({ title, x, series, unit = "", height = 200, yMax }: Props) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const theme = useTheme();
  const shape = series.map((s) => s.label).join("|");
  const data = useRef<uPlot.AlignedData>([[]]);

  // Declared first so that it runs before the plot is built on mount;
  // redraws only when the parent computed new data.
  const values = series.map((s) => s.values);
  useEffect(() => {
    data.current = [x, ...values];
    plot.current?.setData(data.current);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [x, ...values]);

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const axis = cssVar("--muted");
    const grid = cssVar("--grid");
    const opts: uPlot.Options = {
      width: Math.max(el.clientWidth, 200),
      height,
      legend: { show: true, live: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, yMax ?? Math.max(1, max * 1.1)] } },
      axes: [
        { stroke: axis, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
        { stroke: axis, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, size: 56, values: (_u, vals) => vals.map((v) => `${v}${unit}`) },
      ],
      series: [
        {},
        ...series.map((s) => {
          const c = cssVar(s.color);
          return { label: s.label, stroke: c, width: 2, fill: s.fill ? c + "22" : undefined, points: { show: true, size: 7, fill: c, filter: (u: uPlot, si: number) => isolatedPoints(u.data[si] as (number | null)[]) }, value: (_u: uPlot, v: number | null) => (v == null ? "–" : `${Math.round(v * 10) / 10}${unit}`) };
        }),
      ],
    };
    const u = new uPlot(opts, data.current, el);
    plot.current = u;
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(el.clientWidth, 200), height }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
    // Recreated when the theme or the set of series changes; data is set below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [theme, shape, height, unit, yMax]);

  return (
    <figure className="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title} chart`} />
    </figure>
  );
}
