package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// figures are one target's results; zero means not measured.
type figures struct {
	rttP50, rttP99     time.Duration
	burstRate          float64 // updates per second, median of runs
	burstLost          int     // worst run
	burstGaps          int     // replay-gap frames seen, all runs
	firstP50, firstP99 time.Duration
	idleRSS            int64 // KiB
	perInstanceRSS     int64 // KiB of daemon RSS per live instance
	concWall           time.Duration
	concFailed         int
	concP99            time.Duration // one request to each of the instances at once
	concRSS            int64         // KiB after the concurrent instances
	putRate, getRate   float64       // MB/s
	putErr, getErr     string
	fileRSSGrowth      int64 // KiB, peak during the transfers
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

func render(c config, r map[string]*figures, copyRate float64, refVersion string) string {
	o, ref, d := r["ours"], r["reference"], r["direct"]
	var b strings.Builder
	fmt.Fprintf(&b, "| workload | this daemon | reference (%s) | direct stdio / plain copy | ours ÷ reference |\n", refVersion)
	b.WriteString("|---|---|---|---|---|\n")
	row := func(name, ours, refv, direct, rat string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, ours, refv, direct, rat)
	}
	dur := func(x time.Duration) float64 { return float64(x) }
	row(fmt.Sprintf("request round trip p50 (%d requests)", c.roundTrips), ms(o.rttP50), ms(ref.rttP50), ms(d.rttP50), ratio(dur(o.rttP50), dur(ref.rttP50)))
	row("request round trip p99", ms(o.rttP99), ms(ref.rttP99), ms(d.rttP99), ratio(dur(o.rttP99), dur(ref.rttP99)))
	row(fmt.Sprintf("streaming throughput (%d-update burst, median of %d)", c.burst, c.burstRuns),
		rate(o.burstRate, "updates/s", ""), rate(ref.burstRate, "updates/s", ""), rate(d.burstRate, "updates/s", ""), ratio(o.burstRate, ref.burstRate))
	lost := func(f *figures) string {
		s := strconv.Itoa(f.burstLost)
		if f.burstGaps > 0 {
			s += fmt.Sprintf(" (%d gap frames)", f.burstGaps)
		}
		return s
	}
	row("events lost in a burst (worst run)", lost(o), lost(ref), lost(d), "")
	row(fmt.Sprintf("first request incl. spawn p50 (%d instances)", c.firsts), ms(o.firstP50), ms(ref.firstP50), ms(d.firstP50), ratio(dur(o.firstP50), dur(ref.firstP50)))
	row("first request incl. spawn p99", ms(o.firstP99), ms(ref.firstP99), ms(d.firstP99), ratio(dur(o.firstP99), dur(ref.firstP99)))
	row("idle daemon RSS", mib(o.idleRSS), mib(ref.idleRSS), "", ratio(float64(o.idleRSS), float64(ref.idleRSS)))
	kib := func(v int64) string { return strconv.FormatInt(v, 10) + " KiB" }
	row(fmt.Sprintf("daemon RSS per live instance (%d live)", c.perInstance), kib(o.perInstanceRSS), kib(ref.perInstanceRSS), "", ratio(float64(o.perInstanceRSS), float64(ref.perInstanceRSS)))
	conc := func(f *figures) string {
		return fmt.Sprintf("%s wall, %d failed", ms(f.concWall), f.concFailed)
	}
	row(fmt.Sprintf("%d instances started at once", c.concurrent), conc(o), conc(ref), "", ratio(dur(o.concWall), dur(ref.concWall)))
	row(fmt.Sprintf("… then one request to each at once, p99"), ms(o.concP99), ms(ref.concP99), "", ratio(dur(o.concP99), dur(ref.concP99)))
	row(fmt.Sprintf("… daemon RSS with %d live instances", c.concurrent), mib(o.concRSS), mib(ref.concRSS), "", ratio(float64(o.concRSS), float64(ref.concRSS)))
	size := fmt.Sprintf("%d MiB", c.fileBytes>>20)
	row("file PUT "+size, rate(o.putRate, "MB/s", o.putErr), rate(ref.putRate, "MB/s", ref.putErr), rate(copyRate, "MB/s", ""), ratio(o.putRate, ref.putRate))
	row("file GET "+size, rate(o.getRate, "MB/s", o.getErr), rate(ref.getRate, "MB/s", ref.getErr), rate(copyRate, "MB/s", ""), ratio(o.getRate, ref.getRate))
	row("daemon peak RSS growth during PUT+GET", mib(o.fileRSSGrowth), mib(ref.fileRSSGrowth), "", "")
	return b.String()
}
