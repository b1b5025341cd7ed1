"""exposition: /metrics encoding of a demo-sized exporter (benches/exposition.rs, criterion):
the 0.0.4 text format against OpenMetrics, without and with an exemplar on every lock-event
series, the encoders alone and a whole scrape's encoding, criterion's means and the same
pairs taking turns in one loop (minimum and median); this build only (the base has no
OpenMetrics).
"""
import re

PAIRED = re.compile(r"^paired: (encoder|scrape), 0\.0\.4 / OpenMetrics(?: with (\d+) exemplars)?: "
                    r"minimum (\d+) / (\d+) µs \([^)]*\), median (\d+) / (\d+) µs \([^)]*\), (\d+) rounds each$")
SHAPE = re.compile(r"^exposition: (\d+) families, (\d+) samples; 0\.0\.4 (\d+) bytes, OpenMetrics (\d+) bytes, "
                   r"with (\d+) exemplars (\d+) bytes$")
BENCHES = ("encoder_text", "encoder_openmetrics", "encoder_openmetrics_exemplars",
           "scrape_text", "scrape_openmetrics", "scrape_openmetrics_exemplars")


def run(ctx):
    err = ctx.criterion("exposition")
    f = {f"{name}_us": ctx.criterion_mean_s("exposition", name) * 1e6 for name in BENCHES}
    for line in err.splitlines():
        m = PAIRED.match(line.strip())
        if m:
            what, exemplars, *nums = m.groups()
            key = f"paired_{what}" + ("_exemplars" if exemplars else "")
            f[key] = dict(zip(("text_min_us", "openmetrics_min_us", "text_median_us", "openmetrics_median_us",
                               "rounds"), map(int, nums)))
        m = SHAPE.match(line.strip())
        if m:
            f.update(zip(("families", "samples", "text_bytes", "openmetrics_bytes", "exemplars",
                          "openmetrics_exemplars_bytes"), map(int, m.groups())))
    missing = [k for k in ("paired_encoder", "paired_encoder_exemplars", "paired_scrape", "paired_scrape_exemplars",
                           "families") if k not in f]
    if missing:
        ctx.fail(f"benches/exposition.rs printed no {', '.join(missing)} line:\n{err[-800:]}")
    r = {}
    for kind in ("encoder", "scrape"):
        r[f"{kind}_openmetrics_over_text"] = f[f"{kind}_openmetrics_us"] / f[f"{kind}_text_us"]
        r[f"{kind}_openmetrics_exemplars_over_text"] = f[f"{kind}_openmetrics_exemplars_us"] / f[f"{kind}_text_us"]
    return {"figures": f, "ratios": r}
