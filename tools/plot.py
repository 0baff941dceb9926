#!/usr/bin/env python3
"""plot.py: the protocol's figure, drawn from what `ddptok-run CONFIG` wrote.

    tools/plot.py [OUTPUTS_DIR]        (default: outputs/minimum)
    tools/plot.py [-o FILE] METRICS.jsonl [METRICS.jsonl ...]

The second form draws the curves of any training runs from their metrics files (one JSON
object per window, as `train` writes them: artifacts/NAME/runs/<id>/metrics.jsonl): the loss per step, the validation loss where a
line has "val_loss", and the learning rate where lines have "lr", one curve per file. It
writes FILE (default: the first file's name with .png instead of .jsonl) and prints its path.

Reads, under OUTPUTS_DIR:
    train-stop.jsonl, train-continuous.jsonl, train-resume.jsonl
        one JSON object per window: step, loss, N, rank_tokens, ...
    parity.json
        atol, rtol and one entry per normalization (outside, pass, ...)
    parity/reference.npy, parity/reduced-<normalization>.npy
        the single-device gradient and the reduced W-device gradient per normalization

and writes OUTPUTS_DIR/figure.png and OUTPUTS_DIR/figure.svg, one figure of three panels:
    (a) the loss per update of the continuous, stopped and resumed runs: after the stop
        point the resumed curve lies on the continuous one;
    (b) for each normalization, every gradient component's error relative to its own
        tolerance, |g - ref| / (atol + rtol * |ref|), sorted, on a log scale: a component
        passes exactly when its value is at most 1, so the correct normalization stays under
        the line and the wrong ones cross it;
    (c) the supervised tokens of each rank in every window of the continuous run, stacked,
        so that the imbalance between ranks (and the window total N) can be seen.

When the python3 running it lacks numpy or matplotlib (a python3 of its own ahead of the
system's on PATH), it runs itself once more with the system's interpreter, SYSTEM_PYTHON,
if that is another one; DDPTOK_PLOT_NO_FALLBACK=1 in the environment prevents this.

Exit codes: 0 figure written; 2 usage, or an input missing or unreadable (the message names
the file); 3 numpy or matplotlib is not available (nothing written).
"""

import json
import math
import os
import sys

PROG = "plot.py"
RUNS = (("continuous", "train-continuous.jsonl"), ("stop", "train-stop.jsonl"),
        ("resume", "train-resume.jsonl"))
WINDOW_FIELDS = ("step", "loss", "N", "rank_tokens")
SYSTEM_PYTHON = "/usr/bin/python3"
MAX_POINTS = 4000  # points drawn per parity curve (the sorted curve is thinned evenly)


class InputError(Exception):
    """A missing or malformed input file: exit 2 with the message."""


def fail(code, msg):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(code)


def read_windows(path):
    """The windows of one training run, ordered by step (a later line for the same step
    replaces an earlier one). A rejected window has loss None, and so has the window where
    a run went non-finite (its line says "nonfinite": true)."""
    by_step = {}
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    w = json.loads(line)
                except ValueError as ex:
                    raise InputError(f"{path}:{lineno}: not a JSON object ({ex})")
                if not isinstance(w, dict):
                    raise InputError(f"{path}:{lineno}: not a JSON object")
                for k in WINDOW_FIELDS:
                    if k not in w:
                        raise InputError(f"{path}:{lineno}: field \"{k}\" is missing")
                if (not isinstance(w["step"], int) or not isinstance(w["rank_tokens"], list)
                        or not all(isinstance(t, int) for t in w["rank_tokens"])
                        or not (w["loss"] is None or isinstance(w["loss"], (int, float)))):
                    raise InputError(f"{path}:{lineno}: \"step\" must be an integer, "
                                     "\"rank_tokens\" a list of integers and \"loss\" a "
                                     "number or null")
                by_step[w["step"]] = w
    except OSError as ex:
        raise InputError(f"cannot read {path}: {ex.strerror}")
    return [by_step[s] for s in sorted(by_step)]


def read_parity(path):
    try:
        with open(path, encoding="utf-8") as f:
            p = json.load(f)
    except OSError as ex:
        raise InputError(f"cannot read {path}: {ex.strerror}")
    except ValueError as ex:
        raise InputError(f"{path}: not JSON ({ex})")
    if not isinstance(p, dict) or not isinstance(p.get("modes"), list) or not p["modes"]:
        raise InputError(f"{path}: expected an object with a non-empty \"modes\" list")
    for k in ("atol", "rtol"):
        if not isinstance(p.get(k), (int, float)):
            raise InputError(f"{path}: \"{k}\" is missing or not a number")
    for m in p["modes"]:
        if not isinstance(m, dict) or not isinstance(m.get("normalization"), str):
            raise InputError(f"{path}: every entry of \"modes\" needs a \"normalization\" name")
    return p


def load_vector(np, path):
    try:
        v = np.load(path, allow_pickle=False)
    except OSError as ex:
        raise InputError(f"cannot read {path}: {ex.strerror or ex}")
    except ValueError as ex:
        raise InputError(f"{path}: not a NumPy array file ({ex})")
    if v.dtype.kind != "f":
        raise InputError(f"{path}: expected a floating-point vector, found dtype {v.dtype}")
    return v.astype(np.float64).ravel()


def thin(np, y):
    """Evenly spaced samples of a sorted curve, keeping both ends."""
    n = len(y)
    if n <= MAX_POINTS:
        return np.arange(n), y
    idx = np.unique(np.linspace(0, n - 1, MAX_POINTS).round().astype(np.int64))
    return idx, y[idx]


def legend_below(ax, **kw):
    """The panel's legend under its axes, where it cannot hide a curve."""
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.13), fontsize=8.5, title_fontsize=8.5,
              frameon=False, **kw)


def span(x):
    a, b = int(x[0]), int(x[-1])
    return f"update {a}" if a == b else f"updates {a}-{b}"


def losses(np, windows):
    x = np.array([w["step"] for w in windows], dtype=float)
    y = np.array([np.nan if w["loss"] is None else float(w["loss"]) for w in windows])
    return x, y


def panel_loss(ax, np, runs):
    from matplotlib import ticker
    cont, stop, res = runs["continuous"], runs["stop"], runs["resume"]
    few = max(len(cont), len(stop) + len(res)) <= 40
    notes = []
    xc, yc = losses(np, cont)
    xs, ys = losses(np, stop)
    xr, yr = losses(np, res)
    # the stopped run underneath as a wide pale band, the continuous run on it, the resumed
    # run dashed with open markers on top: where they agree all three are seen at once
    if len(xs):
        ax.plot(xs, ys, color="tab:orange", lw=6, alpha=0.35, solid_capstyle="round",
                marker="o" if len(xs) == 1 else None, ms=9,
                label=f"stopped run ({span(xs)})")
    if len(xc):
        ax.plot(xc, yc, color="tab:blue", lw=1.6, marker="." if few else None, ms=7,
                label=f"continuous run ({span(xc)})")
    if len(xr):
        every = max(1, len(xr) // 25)
        ax.plot(xr, yr, color="tab:green", lw=1.4, ls=(0, (4, 3)), marker="o", ms=6,
                mfc="none", mew=1.3, markevery=every,
                label=f"resumed from checkpoint ({span(xr)})")
    stop_at = None
    if len(xs):
        stop_at = int(xs[-1])
    elif len(xr):
        stop_at = int(xr[0]) - 1
    if stop_at is not None:
        ax.axvline(stop_at + 0.5, color="0.35", ls=":", lw=1.5,
                   label=f"stop + checkpoint after update {stop_at}")

    # the claim of the panel, measured: the resumed losses against the continuous ones
    cont_by_step = {w["step"]: w["loss"] for w in cont}
    common = [(w["loss"], cont_by_step[w["step"]]) for w in res if w["step"] in cont_by_step]
    if common:
        diffs = [abs(a - b) for a, b in common if a is not None and b is not None]
        mismatch = sum(1 for a, b in common if (a is None) != (b is None))
        worst = max(diffs) if diffs else 0.0
        if worst == 0.0 and mismatch == 0:
            notes.append(f"resumed = continuous on all {len(common)} common updates\n"
                         "(max |Δloss| = 0)")
        else:
            notes.append(f"resumed vs continuous on {len(common)} common updates:\n"
                         f"max |Δloss| = {worst:.3g}"
                         + (f", {mismatch} rejected in one run only" if mismatch else ""))
    elif res:
        notes.append("no update in common between the resumed and continuous runs")
    else:
        notes.append("no resumed windows")
    skipped = sum(1 for w in cont if w["loss"] is None and not w.get("nonfinite"))
    if skipped:
        notes.append(f"{skipped} empty window{'s' if skipped > 1 else ''} skipped (no loss)")
    diverged = [w["step"] for r in (cont, stop, res) for w in r if w.get("nonfinite")]
    if diverged:
        notes.append(f"went non-finite at step {min(diverged)} (the run stopped there)")
    if not (len(xc) or len(xs) or len(xr)):
        notes.append("no training windows in the input")
    ax.text(0.98, 0.97, "\n".join(notes), transform=ax.transAxes, ha="right", va="top",
            fontsize=9, bbox=dict(boxstyle="round,pad=0.4", fc="white", ec="0.7", alpha=0.9))
    ax.set_title("(a) training loss per update: continuous vs stopped + resumed")
    ax.set_xlabel("update (optimizer step)")
    ax.set_ylabel("loss: mean over the window's supervised tokens")
    ax.grid(True, alpha=0.3)
    legend_below(ax)
    marks = [np.array([stop_at + 0.5])] if stop_at is not None else []
    xall = np.concatenate([xc, xs, xr] + marks)
    if xall.size:
        lo, hi = float(xall.min()), float(xall.max())
        pad = max(0.6, 0.02 * (hi - lo))
        ax.set_xlim(lo - pad, hi + pad)
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))


def panel_parity(ax, np, parity, ref, grads):
    atol, rtol = float(parity["atol"]), float(parity["rtol"])
    tol = atol + rtol * np.abs(ref)
    curves = []
    for m in parity["modes"]:
        name = m["normalization"]
        d = np.abs(grads[name] - ref)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(d == 0, 0.0, d / tol)  # tol == 0 and d > 0: inf
        r[np.isnan(r)] = np.inf  # a NaN in the gradient is outside, as in the parity check
        curves.append((m, np.sort(r)))
    finite_pos = [c[(c > 0) & np.isfinite(c)] for _, c in curves]
    finite_pos = np.concatenate(finite_pos) if finite_pos else np.array([])
    if finite_pos.size:
        floor = 10.0 ** (math.floor(math.log10(finite_pos.min())) - 1)
        ceil = 10.0 ** (math.ceil(math.log10(max(finite_pos.max(), 1.0))) + 1)
    else:
        floor, ceil = 1e-6, 1e2
    floor = min(floor, 1e-3)
    notes = [f"atol = {atol:g}, rtol = {rtol:g}, {len(ref)} components"]
    # the negative controls get a line style each, the first ones wider, so that curves
    # which coincide (two wrong normalizations can agree on a window) all stay visible
    styles = {"global_token": dict(color="tab:green", lw=2.6, zorder=5)}
    others = iter([dict(color="tab:red", lw=3.4, alpha=0.75),
                   dict(color="tab:purple", lw=1.8, ls=(0, (5, 2))),
                   dict(color="tab:orange", lw=1.6, ls=(0, (1.5, 1.5))),
                   dict(color="tab:brown", lw=1.4, ls="-."),
                   dict(color="tab:pink", lw=1.2),
                   dict(color="tab:cyan", lw=1.0)])
    seen = []
    n = len(ref)
    any_zero = any_inf = False
    for m, r in curves:
        name = m["normalization"]
        st = styles.get(name) or dict(next(others, dict(color="0.4", lw=1.0)), zorder=4)
        zeros = int(np.count_nonzero(r == 0))
        infs = int(np.count_nonzero(np.isinf(r)))
        nans = int(np.count_nonzero(np.isnan(grads[name])))
        any_zero |= zeros > 0
        any_inf |= infs > 0
        outside = int(np.count_nonzero(~(r <= 1)))
        if name == "global_token":
            verdict = "pass" if outside == 0 else "FAIL"
        elif m.get("distinguishable") is False:
            verdict = "same as global_token on this window"
        elif m.get("required") is False:
            # too close to global_token on this window for any comparison to require it
            verdict = "caught" if outside else "near global_token here, not required"
        else:
            verdict = "caught" if outside else "NOT caught"
        extra = (f"; {zeros} exactly equal" if zeros else "") + (f"; {nans} NaN" if nans else "")
        same = [o for o in seen if np.array_equal(grads[o], grads[name], equal_nan=True)]
        if same:
            extra += f"; identical to {same[0]}"
        seen.append(name)
        idx, y = thin(np, np.clip(r, floor, ceil))
        x = (idx + 1) / n * 100.0
        ax.plot(x, y, drawstyle="steps-post" if n <= 50 else "default",
                label=f"{name}: {outside}/{n} outside ({verdict}{extra})", **st)
    ax.axhline(1.0, color="black", lw=1.4, ls="--",
               label="tolerance: |g − ref| = atol + rtol·|ref|")
    ax.axhspan(1.0, ceil, color="tab:red", alpha=0.06, lw=0)
    ax.set_yscale("log")
    ax.set_ylim(floor / 3, ceil)
    ax.set_xlim(0, 100)
    if any_zero:
        notes.append(f"exact (|g − ref| = 0): drawn at the floor {floor:.0e}")
    if any_inf:
        notes.append(f"NaN, or an error where the tolerance is 0: drawn at {ceil:.0e}")
    ax.text(0.02, 0.97, "\n".join(notes), transform=ax.transAxes, ha="left", va="top",
            fontsize=8.5, bbox=dict(boxstyle="round,pad=0.4", fc="white", ec="0.7", alpha=0.9))
    ax.text(0.98, 1.0, "outside the tolerance ↑", transform=ax.get_yaxis_transform(),
            ha="right", va="bottom", fontsize=8.5, color="tab:red")
    ax.set_title("(b) parity: gradient error per normalization vs tolerance")
    ax.set_xlabel("gradient components, sorted by error ratio (%)")
    ax.set_ylabel("|g − ref| / (atol + rtol·|ref|)   (log)")
    ax.grid(True, which="major", alpha=0.3)
    legend_below(ax)


def panel_tokens(ax, np, cont):
    from matplotlib import ticker
    ax.set_title("(c) supervised tokens per rank per window (continuous run)")
    ax.set_xlabel("update (window of the continuous run)")
    ax.set_ylabel("supervised tokens (stacked: the total is N)")
    if not cont:
        ax.text(0.5, 0.5, "no windows", transform=ax.transAxes, ha="center")
        return
    world = max(len(w["rank_tokens"]) for w in cont)
    steps = np.array([w["step"] for w in cont], dtype=float)
    toks = np.zeros((len(cont), world))
    for i, w in enumerate(cont):
        toks[i, :len(w["rank_tokens"])] = w["rank_tokens"]
    total = toks.sum(axis=1)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
              "tab:pink", "tab:gray"]
    bottom = np.zeros(len(cont))
    grand = total.sum()
    width = 0.85 if len(cont) > 1 else 0.5
    for r in range(world):
        share = 100.0 * toks[:, r].sum() / grand if grand else 0.0
        ax.bar(steps, toks[:, r], bottom=bottom, width=width, color=colors[r % len(colors)],
               lw=0, label=f"rank {r}: mean {toks[:, r].mean():.0f} tokens, {share:.0f}% of all")
        bottom += toks[:, r]
    nz = total > 0
    title = None
    if world > 1 and nz.any():
        hi, lo = toks[nz].max(axis=1), toks[nz].min(axis=1)
        fin = hi[lo > 0] / lo[lo > 0]
        lines = []
        if fin.size:
            lines.append(f"largest / smallest rank per window: median {np.median(fin):.2f}, "
                         f"max {fin.max():.2f}")
        empty_rank = int(np.count_nonzero(lo == 0))
        if empty_rank:
            lines.append(f"{empty_rank} window{'s' if empty_rank > 1 else ''} with an empty rank")
        title = "\n".join(lines) or None
    empty = int(np.count_nonzero(~nz))
    if empty:
        ax.plot(steps[~nz], np.zeros(empty), "kx", ms=8, mew=1.5, clip_on=False, zorder=5,
                label=f"empty window (N = 0): {empty}")
    ax.set_ylim(0, max(total.max(), 1) * 1.05)
    ax.set_xlim(steps.min() - 1, steps.max() + 1)
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.grid(True, axis="y", alpha=0.3)
    legend_below(ax, title=title)


def system_python_fallback(argv):
    """Runs this script again with SYSTEM_PYTHON when that is another interpreter (once:
    the environment variable marks the second run). Returns only when it does not."""
    if os.environ.get("DDPTOK_PLOT_NO_FALLBACK") or not os.access(SYSTEM_PYTHON, os.X_OK):
        return
    try:
        if os.path.samefile(os.path.realpath(sys.executable), os.path.realpath(SYSTEM_PYTHON)):
            return
    except OSError:
        pass
    sys.stdout.flush()
    env = dict(os.environ, DDPTOK_PLOT_NO_FALLBACK="1")
    try:
        os.execve(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(argv[0])] + argv[1:], env)
    except OSError:
        pass


def read_curve(path):
    """(steps, losses, (val_steps, val_losses), (lr_steps, lrs)) of one metrics file."""
    windows = read_windows(path)
    if not windows:
        raise InputError(f"{path}: no window in it")
    kept = [w for w in windows if w["loss"] is not None]
    val = [w for w in windows if isinstance(w.get("val_loss"), (int, float))]
    lr = [w for w in windows if isinstance(w.get("lr"), (int, float))]
    return ([w["step"] for w in kept], [w["loss"] for w in kept],
            ([w["step"] for w in val], [w["val_loss"] for w in val]),
            ([w["step"] for w in lr], [w["lr"] for w in lr]))


def plot_metrics(plt, paths, out):
    """The training curves of the metrics files `paths`, written to `out`."""
    try:
        curves = [(p, read_curve(p)) for p in paths]
    except InputError as ex:
        fail(2, str(ex))
    has_lr = any(c[3][0] for _, c in curves)
    fig, axes = plt.subplots(1, 2 if has_lr else 1, figsize=(13 if has_lr else 7.5, 5),
                             layout="constrained", squeeze=False)
    ax = axes[0][0]
    for p, (steps, loss, val, _) in curves:
        line, = ax.plot(steps, loss, label=f"{p}: training loss")
        if val[0]:
            ax.plot(val[0], val[1], "o--", color=line.get_color(), label=f"{p}: validation")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (mean over the window's supervised tokens)")
    ax.grid(True, alpha=0.3)
    legend_below(ax)
    if has_lr:
        ax = axes[0][1]
        for p, (_, _, _, lr) in curves:
            if lr[0]:
                ax.plot(lr[0], lr[1], label=p)
        ax.set_xlabel("step")
        ax.set_ylabel("learning rate")
        ax.grid(True, alpha=0.3)
        legend_below(ax)
    try:
        fig.savefig(out, dpi=110, metadata={"Software": None})
    except OSError as ex:
        fail(2, f"cannot write {ex.filename or out}: {ex.strerror}")
    plt.close(fig)
    print(out)
    return 0


def import_plotting(argv):
    """numpy and matplotlib.pyplot, or exit 3 (after trying the system's interpreter)."""
    try:
        import numpy as np
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as ex:
        system_python_fallback(argv)
        fail(3, f"cannot draw the figure: {ex.name or ex} is not available for {sys.executable} "
                "(install numpy and matplotlib, e.g. the Debian packages python3-numpy and "
                "python3-matplotlib); nothing written")
    return np, plt


def metrics_main(argv, args):
    """plot.py [-o FILE] METRICS.jsonl...: the curves of training runs."""
    out = None
    if "-o" in args:
        i = args.index("-o")
        if i + 1 >= len(args):
            fail(2, "usage: plot.py [-o FILE] METRICS.jsonl [METRICS.jsonl ...]")
        out, args = args[i + 1], args[:i] + args[i + 2:]
    if not args:
        fail(2, "usage: plot.py [-o FILE] METRICS.jsonl [METRICS.jsonl ...]")
    bad = [a for a in args if not a.endswith(".jsonl")]
    if bad:
        fail(2, f"not a metrics file (.jsonl): {bad[0]}")
    missing = [a for a in args if not os.path.isfile(a)]
    if missing:
        fail(2, "missing input: " + ", ".join(missing))
    _, plt = import_plotting(argv)
    return plot_metrics(plt, args, out or args[0][:-len(".jsonl")] + ".png")


def main(argv):
    args = argv[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if args and ("-o" in args or args[0].endswith(".jsonl")):
        return metrics_main(argv, args)
    if len(args) > 1 or (args and args[0].startswith("-")):
        fail(2, "usage: plot.py [OUTPUTS_DIR] | plot.py [-o FILE] METRICS.jsonl...")
    outdir = args[0] if args else "outputs/minimum"
    np, plt = import_plotting(argv)

    if not os.path.isdir(outdir):
        fail(2, f"missing input: {outdir} is not a directory (run `ddptok-run CONFIG` first)")
    parity_json = os.path.join(outdir, "parity.json")
    dump = os.path.join(outdir, "parity")
    needed = [os.path.join(outdir, f) for _, f in RUNS] + [parity_json]
    missing = [p for p in needed if not os.path.isfile(p)]
    if missing:
        fail(2, "missing input: " + ", ".join(missing) + " (written by `ddptok-run CONFIG`, "
                "the protocol)")
    try:
        runs = {name: read_windows(os.path.join(outdir, f)) for name, f in RUNS}
        parity = read_parity(parity_json)
        vec_paths = {"": os.path.join(dump, "reference.npy")}
        for m in parity["modes"]:
            name = m["normalization"]
            vec_paths[name] = os.path.join(dump, f"reduced-{name}.npy")
        missing = [p for p in vec_paths.values() if not os.path.isfile(p)]
        if missing:
            raise InputError("missing input: " + ", ".join(missing)
                             + " (the parity dump the protocol writes beside parity.json)")
        ref = load_vector(np, vec_paths.pop(""))
        grads = {}
        for name, p in vec_paths.items():
            grads[name] = load_vector(np, p)
            if grads[name].shape != ref.shape:
                raise InputError(f"{p}: {grads[name].size} components, the reference has "
                                 f"{ref.size}")
        if ref.size == 0:
            raise InputError(f"{os.path.join(dump, 'reference.npy')}: empty vector")
    except InputError as ex:
        fail(2, str(ex))

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.titleweight": "bold",
                         "svg.hashsalt": "ddptok", "svg.fonttype": "path"})
    fig, axes = plt.subplots(1, 3, figsize=(19, 7.2), layout="constrained")
    panel_loss(axes[0], np, runs)
    panel_parity(axes[1], np, parity, ref, grads)
    panel_tokens(axes[2], np, runs["continuous"])
    info = []
    if "world" in parity:
        info.append(f"W = {parity['world']} ranks")
    if "accumulation" in parity:
        info.append(f"accumulation {parity['accumulation']}")
    if "reduce" in parity:
        info.append(f"reduce {parity['reduce']}")
    if "backend" in parity:
        info.append(f"backend {parity['backend']}")
    title = "ddptok: the global token mean, checked three ways"
    fig.suptitle(title + (" (" + ", ".join(info) + ")" if info else ""), fontsize=13)

    written = []
    try:
        for ext, meta in (("png", {"Software": None}), ("svg", {"Date": None})):
            path = os.path.join(outdir, "figure." + ext)
            fig.savefig(path, dpi=110, metadata=meta)
            written.append(path)
    except OSError as ex:
        fail(2, f"cannot write {ex.filename or outdir}: {ex.strerror}")
    plt.close(fig)
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
