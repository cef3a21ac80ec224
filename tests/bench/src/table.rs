//! The human-readable twin of the JSON report.

use crate::report::{Check, ConfigResult, Report};

impl Report {
    pub fn print_table(&self) {
        println!(
            "\nmode: {}, {} s per run, {} cores (load generator, mock and gateway share them)",
            self.mode, self.duration_secs, self.cores
        );
        println!("each row is measured against the direct mock run beside it; + is the row minus direct\n");
        self.print_load();
        self.print_stream_and_rss();
        for c in self.configs.iter().filter(|c| c.exited.is_some()) {
            let status = c.exited.as_deref().unwrap_or_default();
            println!(
                "\n!! {}: the process under test exited during its run ({status}); its later figures are errors",
                c.name
            );
        }
        if let Some(l) = &self.litellm {
            println!("\nLiteLLM {} ({} workers): {}", l.version, l.workers, l.status);
        }
        self.print_acceptance();
    }

    fn print_load(&self) {
        println!(
            "{:<13} {:>5} | {:>9} {:>8} {:>8} | {:>9} {:>8} {:>8} | {:>6} | {:>8} {:>8} | {:>9}",
            "config",
            "conc",
            "direct/s",
            "p50 µs",
            "p99 µs",
            "row r/s",
            "p50 µs",
            "p99 µs",
            "share",
            "+p50 µs",
            "+p99 µs",
            "errors d/r"
        );
        for c in &self.configs {
            for l in &c.load {
                println!(
                    "{:<13} {:>5} | {:>9.1} {:>8.1} {:>8.1} | {:>9.1} {:>8.1} {:>8.1} | {:>5.1}% | {:>8.1} {:>8.1} | {:>4}/{:<4}",
                    c.name,
                    l.concurrency,
                    l.direct.rps,
                    l.direct.p50_us,
                    l.direct.p99_us,
                    l.gateway.rps,
                    l.gateway.p50_us,
                    l.gateway.p99_us,
                    l.throughput_ratio * 100.0,
                    l.added_p50_us,
                    l.added_p99_us,
                    l.direct.errors,
                    l.gateway.errors,
                );
            }
        }
    }

    fn print_stream_and_rss(&self) {
        let words = self.configs.first().map_or(0, |c| c.stream.words);
        println!("\nstreaming at c=1 ({words} words), and peak RSS per configuration:");
        println!(
            "{:<13} | {:>10} {:>10} {:>11} | {:>11} {:>11} | {:>6} {:>9} | {:>9} | settings",
            "config",
            "ttfb d µs",
            "ttfb r µs",
            "+ttfb p50",
            "+chunk p50",
            "chunk d µs",
            "frames",
            "errors d/r",
            "peak MiB"
        );
        for c in &self.configs {
            let s = &c.stream;
            println!(
                "{:<13} | {:>10.1} {:>10.1} {:>+11.1} | {:>+11.2} {:>11.2} | {:>6} {:>4}/{:<4} | {:>9} | {}",
                c.name,
                s.direct.ttfb_p50_us,
                s.gateway.ttfb_p50_us,
                s.added_ttfb_p50_us,
                s.added_per_chunk_p50_us,
                s.direct.per_chunk_p50_us,
                s.gateway.frames_per_stream,
                s.direct.errors,
                s.gateway.errors,
                rss(c),
                settings(c),
            );
        }
    }

    fn print_acceptance(&self) {
        let Some(name) = &self.acceptance.configuration else {
            println!("\nacceptance targets: not read (they apply to the `default` configuration, not measured)");
            return;
        };
        println!("\nacceptance targets, `{name}` configuration (figures only; the exit code ignores them):");
        for check in &self.acceptance.checks {
            println!("  {}", check_line(check));
        }
    }
}

fn rss(c: &ConfigResult) -> String {
    match (c.peak_rss_kib, &c.exited) {
        (Some(kib), _) => format!("{:.1}", kib as f64 / 1024.0),
        (None, Some(_)) => "died".into(),
        (None, None) => "unknown".into(),
    }
}

fn settings(c: &ConfigResult) -> String {
    if c.settings.is_empty() {
        "as shipped".into()
    } else {
        c.settings.join(" ")
    }
}

fn check_line(c: &Check) -> String {
    let value = c
        .value
        .map_or_else(|| "not measured".into(), |v| format!("{v:.1} {}", c.unit));
    let verdict = match c.met {
        Some(true) => "met",
        Some(false) => "NOT met",
        None => "not judged",
    };
    let note = c.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
    format!("{:<34} {:>12}  {:>16}  {verdict}{note}", c.what, c.target, value)
}
