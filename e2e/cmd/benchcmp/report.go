package main

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// figures are one daemon's once-only results; zero means not measured.
type figures struct {
	idleRSS          int64 // KiB
	perInstanceRSS   int64 // KiB of daemon RSS per live instance
	concWall         time.Duration
	concFailed       int
	concP99          time.Duration // one request to each of the instances at once
	concRSS          int64         // KiB after the concurrent instances
	putRate, getRate float64       // MB/s
	putErr, getErr   string
	fileRSSGrowth    int64 // KiB, peak during the transfers
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

func ms(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 2, 64) + " ms"
}

func mib(kib int64) string { return strconv.FormatFloat(float64(kib)/1024, 'f', 1, 64) + " MiB" }

func ratio(ours, ref float64) string {
	if ours == 0 || ref == 0 {
		return "–"
	}
	return strconv.FormatFloat(ours/ref, 'f', 2, 64) + "×"
}

func rate(v float64, unit, errText string) string {
	if errText != "" {
		return "failed: " + errText
	}
	if v == 0 {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " " + unit
}

// ratioOf is ours/ref, 0 when either is missing.
func ratioOf(ours, ref float64) float64 {
	if ours == 0 || ref == 0 {
		return 0
	}
	return ours / ref
}

func fmtRatio(r float64) string {
	if r == 0 {
		return "–"
	}
	return strconv.FormatFloat(r, 'f', 2, 64) + "×"
}

func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

func kups(v float64) string { return strconv.FormatFloat(v/1000, 'f', 1, 64) + "k" }

// renderRounds prints one table per workload, a row per round, and the
// closing table of paired ratios.
func renderRounds(c config, rounds []*round, refVersion string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "This daemon against the reference (%s), %d interleaved rounds; %d CPUs; load is /proc/loadavg (1, 5, 15 min) at each round's start.\n\n", refVersion, len(rounds), runtime.NumCPU())
	dur := func(x time.Duration) float64 { return float64(x) }

	fmt.Fprintf(&b, "Request round trip, µs (%d timed requests per leg and round, the legs taking turns in blocks of %d; proxy: e2e/testagent -proxy; direct: the mock over its pipes)\n\n", c.roundTrips, c.block)
	b.WriteString("| round | load | p50 ours | p50 reference | p50 proxy | p50 direct | p50 ours ÷ reference | p50 ours ÷ proxy | p99 ours | p99 reference | p99 proxy | p99 ours ÷ reference |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range rounds {
		o, f, p, d := r.rtt["ours"], r.rtt["reference"], r.rtt["proxy"], r.rtt["direct"]
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", i+1, r.load,
			us(o.p50), us(f.p50), us(p.p50), us(d.p50), fmtRatio(ratioOf(dur(o.p50), dur(f.p50))), fmtRatio(ratioOf(dur(o.p50), dur(p.p50))),
			us(o.p99), us(f.p99), us(p.p99), fmtRatio(ratioOf(dur(o.p99), dur(f.p99))))
	}

	fmt.Fprintf(&b, "\nStreaming %d updates to one connected reader in %d bursts, the legs taking turns burst by burst, updates/s; then the daemon's settled RSS with that instance's replay full\n\n", max(1, c.stream/c.bursts)*c.bursts, c.bursts)
	b.WriteString("| round | ours | reference | direct | ours ÷ direct | ours ÷ reference | lost ours | lost reference | RSS ours | RSS reference | RSS ours ÷ reference |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	lost := func(s streamFigures) string {
		out := strconv.Itoa(s.lost)
		if s.gaps > 0 {
			out += fmt.Sprintf(" (%d gap frames)", s.gaps)
		}
		return out
	}
	for i, r := range rounds {
		o, f, d := r.stream["ours"], r.stream["reference"], r.stream["direct"]
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", i+1,
			kups(o.rate), kups(f.rate), kups(d.rate), fmtRatio(ratioOf(o.rate, d.rate)), fmtRatio(ratioOf(o.rate, f.rate)),
			lost(o), lost(f), mib(r.rss["ours"]), mib(r.rss["reference"]), fmtRatio(ratioOf(float64(r.rss["ours"]), float64(r.rss["reference"]))))
	}

	fmt.Fprintf(&b, "\nFirst request of a new instance, spawn included, ms (%d instances per leg and round)\n\n", c.firsts)
	b.WriteString("| round | p50 ours | p50 reference | p50 direct | p50 ours ÷ reference | p99 ours | p99 reference | p99 ours ÷ reference |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for i, r := range rounds {
		o, f, d := r.spawn["ours"], r.spawn["reference"], r.spawn["direct"]
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", i+1, ms(o.p50), ms(f.p50), ms(d.p50),
			fmtRatio(ratioOf(dur(o.p50), dur(f.p50))), ms(o.p99), ms(f.p99), fmtRatio(ratioOf(dur(o.p99), dur(f.p99))))
	}

	fmt.Fprintf(&b, "\nFirst request of a new instance of the minimal agent (a shell script that answers initialize), spawn included, ms (%d instances per leg and round)\n\n", c.firsts)
	b.WriteString("| round | p50 ours | p50 reference | p50 ours ÷ reference | p99 ours | p99 reference | p99 ours ÷ reference |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for i, r := range rounds {
		o, f := r.spawnMin["ours"], r.spawnMin["reference"]
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s |\n", i+1, ms(o.p50), ms(f.p50),
			fmtRatio(ratioOf(dur(o.p50), dur(f.p50))), ms(o.p99), ms(f.p99), fmtRatio(ratioOf(dur(o.p99), dur(f.p99))))
	}

	b.WriteString("\nClosing figures: the paired ratio of each round (ours first), then their median and range\n\n")
	b.WriteString("| figure | per round | median | range |\n|---|---|---|---|\n")
	pairs := []struct {
		name string
		f    func(r *round) float64
	}{
		{"round trip p50, ours ÷ reference", func(r *round) float64 { return ratioOf(dur(r.rtt["ours"].p50), dur(r.rtt["reference"].p50)) }},
		{"round trip p99, ours ÷ reference", func(r *round) float64 { return ratioOf(dur(r.rtt["ours"].p99), dur(r.rtt["reference"].p99)) }},
		{"round trip p50, ours ÷ minimal proxy", func(r *round) float64 { return ratioOf(dur(r.rtt["ours"].p50), dur(r.rtt["proxy"].p50)) }},
		{"streaming, ours ÷ direct stdio", func(r *round) float64 { return ratioOf(r.stream["ours"].rate, r.stream["direct"].rate) }},
		{"streaming, ours ÷ reference", func(r *round) float64 { return ratioOf(r.stream["ours"].rate, r.stream["reference"].rate) }},
		{"first request incl. spawn p50, ours ÷ reference", func(r *round) float64 { return ratioOf(dur(r.spawn["ours"].p50), dur(r.spawn["reference"].p50)) }},
		{"first request incl. spawn p99, ours ÷ reference", func(r *round) float64 { return ratioOf(dur(r.spawn["ours"].p99), dur(r.spawn["reference"].p99)) }},
		{"first request incl. spawn p50, minimal agent, ours ÷ reference", func(r *round) float64 {
			return ratioOf(dur(r.spawnMin["ours"].p50), dur(r.spawnMin["reference"].p50))
		}},
		{fmt.Sprintf("RSS after %d updates, ours ÷ reference", c.stream), func(r *round) float64 {
			return ratioOf(float64(r.rss["ours"]), float64(r.rss["reference"]))
		}},
	}
	for _, p := range pairs {
		var vals []float64
		var each []string
		for _, r := range rounds {
			v := p.f(r)
			each = append(each, fmtRatio(v))
			if v != 0 {
				vals = append(vals, v)
			}
		}
		med, span := "–", "–"
		if len(vals) > 0 {
			slices.Sort(vals)
			med = fmtRatio(vals[len(vals)/2])
			span = fmtRatio(vals[0]) + " – " + fmtRatio(vals[len(vals)-1])
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", p.name, strings.Join(each, ", "), med, span)
	}
	return b.String()
}

// renderExtras prints the once-only rows.
func renderExtras(c config, r map[string]*figures, copyRate float64, refVersion string) string {
	o, ref := r["ours"], r["reference"]
	var b strings.Builder
	fmt.Fprintf(&b, "Once, after the rounds\n\n| workload | this daemon | reference (%s) | plain copy | ours ÷ reference |\n", refVersion)
	b.WriteString("|---|---|---|---|---|\n")
	row := func(name, ours, refv, direct, rat string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, ours, refv, direct, rat)
	}
	dur := func(x time.Duration) float64 { return float64(x) }
	row("idle daemon RSS", mib(o.idleRSS), mib(ref.idleRSS), "", ratio(float64(o.idleRSS), float64(ref.idleRSS)))
	kib := func(v int64) string { return strconv.FormatInt(v, 10) + " KiB" }
	row(fmt.Sprintf("daemon RSS per live instance (%d live)", c.perInstance), kib(o.perInstanceRSS), kib(ref.perInstanceRSS), "", ratio(float64(o.perInstanceRSS), float64(ref.perInstanceRSS)))
	conc := func(f *figures) string {
		return fmt.Sprintf("%s wall, %d failed", ms(f.concWall), f.concFailed)
	}
	row(fmt.Sprintf("%d instances started at once", c.concurrent), conc(o), conc(ref), "", ratio(dur(o.concWall), dur(ref.concWall)))
	row("… then one request to each at once, p99", ms(o.concP99), ms(ref.concP99), "", ratio(dur(o.concP99), dur(ref.concP99)))
	row(fmt.Sprintf("… daemon RSS with %d live instances", c.concurrent), mib(o.concRSS), mib(ref.concRSS), "", ratio(float64(o.concRSS), float64(ref.concRSS)))
	size := fmt.Sprintf("%d MiB", c.fileBytes>>20)
	row("file PUT "+size, rate(o.putRate, "MB/s", o.putErr), rate(ref.putRate, "MB/s", ref.putErr), rate(copyRate, "MB/s", ""), ratio(o.putRate, ref.putRate))
	row("file GET "+size, rate(o.getRate, "MB/s", o.getErr), rate(ref.getRate, "MB/s", ref.getErr), rate(copyRate, "MB/s", ""), ratio(o.getRate, ref.getRate))
	row("daemon peak RSS growth during PUT+GET", mib(o.fileRSSGrowth), mib(ref.fileRSSGrowth), "", "")
	return b.String()
}
