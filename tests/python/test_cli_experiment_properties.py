"""`posenc experiment run properties` (docs/experiments.md): masked-LM
pretraining per encoding and seed, fine-tuning on the corpus's labelled tasks
with early stopping, probes of the pretrained model, and the summary's paired
t-tests and correlations; resumption, a corrupted result, a directory of
another suite. Runs --quick on the package tree of test_cli_corpus."""

import json
import math
import re
import shutil

from test_cli_corpus import run, tree  # noqa: F401  (the package-tree fixture)


def blas_of_doctor():
    doctor = run("doctor", "--seconds", 0.05)
    assert doctor.returncode == 0, doctor.stderr
    line = next(line for line in doctor.stdout.splitlines() if line.startswith("BLAS "))
    return line[len("BLAS"):].strip().split(": /")[0]


def properties(tree_root, out, *extra):
    return run("experiment", "run", "properties", "--quick", "--out", out, "--root", tree_root,
               "--vocab-size", 100, "--threads", 1, *extra)


def student_t_two_sided(t, nu, steps=20000):
    """P(|T| >= |t|), T ~ Student t(nu), by Simpson's rule on the density over x = |t| + u / (1 - u)."""
    c = math.exp(math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2)) / math.sqrt(nu * math.pi)

    def f(u):
        if u >= 1:
            return 0.0
        x = abs(t) + u / (1 - u)
        return c * (1 + x * x / nu) ** (-(nu + 1) / 2) / (1 - u) ** 2

    h = 1 / steps
    s = f(0) + f(1) + sum(f(i * h) * (4 if i % 2 else 2) for i in range(1, steps))
    return 2 * s * h / 3


def without_fit(rows):
    """The summary's rows without the fit of the reported checkpoints (read from curves a copy may not keep)."""
    return [{**row, "scores": [{k: v for k, v in cell.items() if k not in ("training_at_best", "validation_at_best")}
                               for cell in row["scores"]]} for row in rows]


def test_quick_suite_pretrains_finetunes_probes_and_resumes(tree, tmp_path):  # noqa: F811
    root, _ = tree
    out = tmp_path / "props"
    r = properties(root, out)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"corpus: wordnet,gcide,fortunes, SentencePiece vocabulary 100 -> {out}/corpus"
    assert [line.split(":")[0] for line in lines if line.startswith("run ")] == [
        "run 1/6 none-s0", "run 2/6 none-s1", "run 3/6 learned-s0", "run 4/6 learned-s1", "run 5/6 rope-s0",
        "run 6/6 rope-s1"]
    assert json.loads((out / "suite.json").read_text()) == {"suite": "properties"}

    result = json.loads((out / "runs" / "learned-s0" / "result.json").read_text())
    # The binary's commit (12 hex digits, "-dirty" with uncommitted changes) and version are recorded.
    assert re.fullmatch(r"[0-9a-f]{12}(-dirty)?|unknown", result["git_revision"]) and result["posenc_version"]
    # And the BLAS, with OpenBLAS's kernel set: a run's last bits depend on it (posenc doctor's BLAS line).
    assert result["blas"] == blas_of_doctor()
    assert [s["stage"] for s in result["stages"]] == ["pretrain", "lexname", "pos", "definition"]
    for stage in result["stages"]:
        # Early stopping: evaluated every 20 steps, the best checkpoint reported, never past the last step.
        assert stage["best_step"] in (20, 40) and stage["best_step"] <= stage["last_step"] <= 40
        record = [json.loads(line) for line in
                  (out / "runs" / "learned-s0" / stage["stage"] / "validation.jsonl").read_text().splitlines()]
        assert [e["step"] for e in record] == list(range(20, stage["last_step"] + 1, 20))
        scores = [e["score"] for e in record]
        best = scores.index(max(scores))  # the first best
        assert record[best]["step"] == stage["best_step"]
        if stage["stage"] == "pretrain":
            assert math.isclose(stage["validation"], -max(scores), rel_tol=1e-12)  # a loss
            assert 0 < stage["test"] < math.log(100) + 1
        else:
            assert stage["validation"] == max(scores) and 0 <= stage["test"] <= 1 and stage["test_count"] > 0
    # The fine-tuning runs start from the best pretraining checkpoint.
    lexname_config = json.loads((out / "runs" / "learned-s0" / "lexname" / "config.json").read_text())
    best = result["stages"][0]["best_step"]
    assert lexname_config["init_from"] == str(out / "runs" / "learned-s0" / "pretrain" / "checkpoints" /
                                              f"step-{best:08d}")
    assert lexname_config["task"] == "text-classify" and lexname_config["seq_len"] == 64
    # Probes: a learned table has indicators; "none" has no table and a constant identical-word map.
    assert set(result["probes"]["table"]) == {"monotonicity", "translation_invariance", "symmetry"}
    none = json.loads((out / "runs" / "none-s0" / "result.json").read_text())
    assert none["probes"]["table"] is None and none["probes"]["identical_word_attention"] is None
    assert "flat to float32 rounding" in none["probes"]["identical_word_attention_note"]

    summary = json.loads((out / "summary.json").read_text())
    assert (summary["suite"], summary["runs"], summary["seeds"]) == ("properties", 6, 2)
    assert [t["name"] for t in summary["tasks"]] == ["lexname", "pos", "definition"]
    assert [(row["encoding"], row["group"]) for row in summary["rows"]] == [
        ("none", "none"), ("learned", "absolute"), ("rope", "relative")]
    learned = summary["rows"][1]
    assert learned["scores"][0]["values"] == [
        json.loads((out / "runs" / f"learned-s{s}" / "result.json").read_text())["stages"][1]["test"] for s in (0, 1)]
    assert learned["indicators"]["monotonicity"]["seeds"] == 2
    # The fit of each reported checkpoint, from the run's curves: the training-batch scores logged over the
    # evaluation interval (20 steps) ending at the best step, beside the validation score there.
    for task, cell in zip(("lexname", "pos", "definition"), learned["scores"]):
        training, validation = [], []
        for s in (0, 1):
            run_dir = out / "runs" / f"learned-s{s}"
            stage = next(x for x in json.loads((run_dir / "result.json").read_text())["stages"] if x["stage"] == task)
            logged = [json.loads(line) for line in (run_dir / task / "metrics.jsonl").read_text().splitlines()]
            window = [e["accuracy"] for e in logged if stage["best_step"] - 20 < e["step"] <= stage["best_step"]]
            assert len(window) == 2  # logged every 10 steps
            training.append(sum(window) / 2)
            validation.append(stage["validation"])
        assert math.isclose(cell["training_at_best"]["mean"], sum(training) / 2, rel_tol=1e-12)
        assert cell["validation_at_best"]["mean"] == sum(validation) / 2
        assert cell["training_at_best"]["seeds"] == cell["validation_at_best"]["seeds"] == 2
    # Every pair of encodings, per task, by a paired t-test over the two seeds.
    assert len(summary["comparisons"]) == 9
    for c in summary["comparisons"]:
        a = next(r for r in summary["rows"] if r["encoding"] == c["a"])["scores"]
        b = next(r for r in summary["rows"] if r["encoding"] == c["b"])["scores"]
        task = [t["name"] for t in summary["tasks"]].index(c["task"])
        d = [x - y for x, y in zip(a[task]["values"], b[task]["values"])]
        assert math.isclose(c["mean_difference"], sum(d) / 2, abs_tol=1e-15)

    # Run again: nothing is recomputed and the summary is the same.
    again = properties(root, out)
    assert again.returncode == 0, again.stderr
    assert sum("done before" in line for line in again.stdout.splitlines()) == 6
    assert json.loads((out / "summary.json").read_text()) == summary

    # Copied elsewhere (suite.json and the results only), every run is reused: the stages name their data by the
    # suite's layout; an older result's absolute paths are read the same way.
    stored = json.loads((out / "runs" / "rope-s0" / "result.json").read_text())
    assert [stage["task_options"]["data"] for stage in stored["config"]["stages"]] == \
        ["corpus"] + [f"corpus/tasks/{task}" for task in ("lexname", "pos", "definition")]
    moved = tmp_path / "elsewhere" / "suite"
    moved.mkdir(parents=True)
    shutil.copy(out / "suite.json", moved)
    for result_path in (out / "runs").glob("*/result.json"):
        stored = json.loads(result_path.read_text())
        if result_path.parent.name == "none-s0":
            for stage in stored["config"]["stages"]:
                stage["task_options"]["data"] = "/old/checkout/out/suite/" + stage["task_options"]["data"]
        (moved / "runs" / result_path.parent.name).mkdir(parents=True)
        (moved / "runs" / result_path.parent.name / "result.json").write_text(json.dumps(stored))
    copied = properties(root, moved)
    assert copied.returncode == 0, copied.stderr
    assert sum("done before" in line for line in copied.stdout.splitlines()) == 6
    # Without the curves the fit is absent, the rest the same.
    assert without_fit(json.loads((moved / "summary.json").read_text())["rows"]) == without_fit(summary["rows"])
    assert "training_at_best" not in json.loads((moved / "summary.json").read_text())["rows"][0]["scores"][0]

    # Interrupted inside fine-tuning (no result, the pos stage's last evaluation and checkpoint gone):
    # it resumes to the same numbers.
    run_dir = out / "runs" / "rope-s1"
    original = json.loads((run_dir / "result.json").read_text())
    (run_dir / "result.json").unlink()
    pos = run_dir / "pos"
    record = (pos / "validation.jsonl").read_text().splitlines()
    last = json.loads(record[-1])["step"]
    (pos / "validation.jsonl").write_text("".join(line + "\n" for line in record[:-1]))
    shutil.rmtree(pos / "checkpoints" / f"step-{last:08d}")
    before = json.loads((out / "runs" / "rope-s0" / "result.json").read_text())
    resumed = properties(root, out)
    assert resumed.returncode == 0, resumed.stderr
    assert "run 6/6 rope-s1: trained" in resumed.stdout
    assert json.loads((out / "summary.json").read_text())["rows"] == summary["rows"]
    assert json.loads((out / "runs" / "rope-s0" / "result.json").read_text()) == before
    # Wall time and tokens/s are every process's: the stages trained before the interruption keep theirs.
    after = json.loads((run_dir / "result.json").read_text())
    for old, new in zip(original["stages"], after["stages"]):
        assert new["seconds"] > 0 and new["tokens_per_second"] > 0
        if old["stage"] in ("pretrain", "lexname"):
            assert (new["seconds"], new["tokens_per_second"]) == (old["seconds"], old["tokens_per_second"])

    # A corrupted result is said, set aside and run again; never mixed into the summary.
    (run_dir / "result.json").write_text("{ truncated")
    fixed = properties(root, out)
    assert fixed.returncode == 0, fixed.stderr
    assert f"{run_dir}/result.json: not valid JSON; moved to {run_dir}/result.json.corrupt and running rope-s1 again" \
        in fixed.stderr
    assert (run_dir / "result.json.corrupt").read_text() == "{ truncated"
    assert json.loads((out / "summary.json").read_text())["rows"] == summary["rows"]

    # The same directory for the other suite is refused before any work.
    r = run("experiment", "run", "extrapolation", "--quick", "--out", out, "--root", root)
    assert (r.returncode, r.stderr) == (
        2, f"posenc: [experiment] {out} holds the 'properties' suite, not 'extrapolation': use another --out\n")
    # A plan change is refused, naming the field.
    r = properties(root, out, "--steps", 60)
    assert r.returncode == 1 and "was written for another configuration" in r.stderr
    # Tasks of an older layout (format 1: definition passages without delimiters) are refused, not mixed in.
    meta = out / "corpus" / "tasks" / "definition" / "task.json"
    meta.write_text(meta.read_text().replace('"posenc-task-2"', '"posenc-task-1"'))
    r = properties(root, out)
    assert (r.returncode, r.stderr) == (
        1, f"posenc: [experiment] {meta}: task format 'posenc-task-1', this posenc writes 'posenc-task-2'; the runs "
           f"in {out} were fine-tuned on the older tasks: use a new --out\n")


def test_sinusoidal_inputs_take_the_suites_amplitude_and_other_runs_keep_theirs(tree, tmp_path):  # noqa: F811
    """The suite's sinusoid amplitude (0.2 * sqrt(2)) is set in every stage of a run with a sinusoidal input
    table; a run without one records the configs' input_scale unchanged (0.02 * sqrt(2)), as the runs of the
    default sweep recorded it before, so their results stay valid."""
    root, _ = tree
    out = tmp_path / "props"
    r = properties(root, out, "--encodings", "learnable-sinusoidal+shaw,shaw", "--seeds", 1)
    assert r.returncode == 0, r.stderr
    for run_name, scale in (("learnable-sinusoidal+shaw-s0", 0.2), ("shaw-s0", 0.02)):
        for stage in ("pretrain", "lexname", "pos", "definition"):
            config = json.loads((out / "runs" / run_name / stage / "config.json").read_text())
            assert config["encoding_parameters"]["input_scale"] == scale * math.sqrt(2), (run_name, stage)


def test_summary_statistics_follow_the_result_files(tmp_path):
    """Hand-written results: the summary's means, paired t-tests and correlations against plain formulas."""
    out = tmp_path / "suite"
    (out / "runs").mkdir(parents=True)
    (out / "suite.json").write_text('{"suite": "properties"}\n')
    scores = {"learned": [0.60, 0.62, 0.65], "shaw": [0.55, 0.56, 0.61], "rope": [0.50, 0.53, 0.52],
              "none": [0.40, 0.41, 0.39]}
    monotonicity = {"learned": 0.9, "shaw": 0.7, "rope": 0.5, "none": 0.1}
    for order, (encoding, values) in enumerate(scores.items()):
        for seed, v in enumerate(values):
            probe = {"monotonicity": monotonicity[encoding] + 0.01 * seed, "translation_invariance": 0.5,
                     "symmetry": 0.2}
            result = {"format": "posenc-properties-run-1", "suite": "properties", "name": f"{encoding}-s{seed}",
                      "order": order * 3 + seed, "encoding": encoding, "seed": seed,
                      "stages": [{"stage": "pretrain", "metric": "masked-LM loss", "best_step": 10, "last_step": 20,
                                  "validation": 2.0, "test": 2.0 + 0.1 * seed, "test_count": 100, "seconds": 1,
                                  "tokens_per_second": 1},
                                 {"stage": "lexname", "metric": "accuracy", "best_step": 40 if seed == 2 else 10,
                                  "last_step": 40 if seed == 2 else 20, "validation": v, "test": v,
                                  "test_count": 100, "seconds": 1, "tokens_per_second": 1}],
                      "probes": {"table": None, "identical_word_attention": probe},
                      "config": {"stages": [{"steps": 20}, {"steps": 40}]}}
            d = out / "runs" / f"{encoding}-s{seed}"
            d.mkdir()
            (d / "result.json").write_text(json.dumps(result))
            if seed == 2:  # lexname's best at its cap: its last evaluation interval gained 0.01 * (order + 1)
                (d / "lexname").mkdir()
                (d / "lexname" / "validation.jsonl").write_text(
                    f'{{"step": 20, "score": {v - 0.01 * (order + 1)}}}\n{{"step": 40, "score": {v}}}\n')
    r = run("experiment", "report", out, "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    rows = {row["encoding"]: row for row in summary["rows"]}
    assert list(rows) == ["learned", "shaw", "rope", "none"]
    cell = rows["learned"]["scores"][0]
    assert math.isclose(cell["mean"], 0.62333333333333333, rel_tol=1e-14)
    assert math.isclose(cell["sd"], math.sqrt(((0.6 - 0.62333333333333333) ** 2 + (0.62 - 0.62333333333333333) ** 2
                                               + (0.65 - 0.62333333333333333) ** 2) / 2), rel_tol=1e-12)
    assert math.isclose(rows["learned"]["pretraining"]["mean"], (math.exp(2) + math.exp(2.1) + math.exp(2.2)) / 3,
                        rel_tol=1e-14)
    pairs = {(c["a"], c["b"]): c for c in summary["comparisons"]}
    assert len(pairs) == 6
    for (a, b), c in pairs.items():
        d = [x - y for x, y in zip(scores[a], scores[b])]
        mean = sum(d) / 3
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
        t = mean / (sd / math.sqrt(3))
        assert math.isclose(c["t"], t, rel_tol=1e-9)
        assert math.isclose(c["p"], student_t_two_sided(t, 2), rel_tol=1e-6, abs_tol=1e-10)
    # Holm's adjusted p over the 6 pairs of the task: the k-th smallest times 6 - k, then running max, capped at 1.
    ranked = sorted(pairs.values(), key=lambda c: c["p"])
    running = 0.0
    for k, c in enumerate(ranked):
        running = max(running, min(1.0, (6 - k) * c["p"]))
        assert math.isclose(c["p_holm"], running, rel_tol=1e-12)
    # By group: learned is the absolute group, shaw and rope the relative one ("none" is not compared); per seed
    # the mean of each group's scores, then the same paired test.
    [group] = summary["group_comparisons"]
    relative = [(x + y) / 2 for x, y in zip(scores["shaw"], scores["rope"])]
    d = [x - y for x, y in zip(scores["learned"], relative)]
    mean = sum(d) / 3
    t = mean / (math.sqrt(sum((x - mean) ** 2 for x in d) / 2) / math.sqrt(3))
    assert (group["task"], group["a"], group["b"], group["encodings_a"], group["encodings_b"], group["seeds"]) == \
        ("lexname", "absolute", "relative", 1, 2, 3)
    assert math.isclose(group["mean_b"], sum(relative) / 3, rel_tol=1e-14)
    assert math.isclose(group["mean_difference"], mean, rel_tol=1e-12, abs_tol=1e-15)
    assert math.isclose(group["t"], t, rel_tol=1e-9)
    assert math.isclose(group["p"], student_t_two_sided(t, 2), rel_tol=1e-6, abs_tol=1e-10)
    assert group["p_holm"] == group["p"]  # one group pair per task
    correlation = next(c for c in summary["correlations"]
                       if c["property"] == "identical_word_attention.monotonicity")
    assert correlation["encodings"] == 4 and math.isclose(correlation["spearman"], 1.0, rel_tol=1e-12)
    x = [monotonicity[e] + 0.01 for e in scores]
    y = [sum(v) / 3 for v in scores.values()]
    mx, my = sum(x) / 4, sum(y) / 4
    pearson = sum((a - mx) * (b - my) for a, b in zip(x, y)) / math.sqrt(
        sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))
    assert math.isclose(correlation["pearson"], pearson, rel_tol=1e-12)
    # Each with the two-sided p of its t test; 4 encodings: 2 degrees of freedom, where p = 1 - |r| exactly.
    assert math.isclose(correlation["pearson_p"], 1 - abs(pearson), rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(correlation["spearman_p"], 2 / 24, rel_tol=1e-15)  # exact: 2 of the 4! orderings
    # The encoding r rests on most: each left out in turn, the one whose removal moves r the most.
    def plain_pearson(xs, ys):
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        return sum((a - mx) * (b - my) for a, b in zip(xs, ys)) / math.sqrt(
            sum((a - mx) ** 2 for a in xs) * sum((b - my) ** 2 for b in ys))
    without = {e: plain_pearson(x[:k] + x[k + 1:], y[:k] + y[k + 1:]) for k, e in enumerate(scores)}
    influential = max(without, key=lambda e: abs(without[e] - pearson))
    assert correlation["pearson_without"]["encoding"] == influential
    assert math.isclose(correlation["pearson_without"]["pearson"], without[influential], rel_tol=1e-12)
    # How the stages ended, against each run's step cap: seed 2's lexname ran to its cap with its best there.
    # And by how much those at their cap were still improving: the median of 0.01, 0.02, 0.03, 0.04.
    assert summary["stopping"][0] == {"stage": "pretrain", "most_steps": 20, "runs": 12, "stopped_early": 0,
                                      "best_at_most_steps": 0, "median_best_step": 10, "last_interval_gain": None}
    lexname_stops = dict(summary["stopping"][1])
    assert math.isclose(lexname_stops.pop("last_interval_gain"), 0.025, rel_tol=1e-9)
    assert lexname_stops == {"stage": "lexname", "most_steps": 40, "runs": 12, "stopped_early": 8,
                             "best_at_most_steps": 4, "median_best_step": 10}
    # The text table names every encoding, and says how the stages ended.
    table = run("experiment", "report", out)
    assert table.returncode == 0 and all(e in table.stdout for e in scores)
    assert ("stopping: lexname stopped early in 8 of 12 runs, best at its 40-step cap in 4 (median gain over their "
            "last evaluation interval 0.025)\n") in table.stdout

    # --markdown: the same numbers as Markdown tables, the tests against the first row (learned).
    md = run("experiment", "report", out, "--markdown")
    assert md.returncode == 0, md.stderr
    lines = md.stdout.splitlines()
    assert lines[0] == ("| encoding | group | seeds | masked-LM perplexity | lexname accuracy | table: mono. / trans. inv. "
                        "/ sym. | identical-word attention: mono. / trans. inv. / sym. |")
    learned = rows["learned"]
    ppl = learned["pretraining"]
    assert lines[2] == (f"| learned | {learned['group']} | 3 | {ppl['mean']:.1f} ± {ppl['sd']:.1f} | "
                        f"{cell['mean']:.3f} ± {cell['sd']:.3f} | — | 0.91 / 0.50 / 0.20 |")
    tests_at = lines.index("| encoding | lexname |")
    assert lines[tests_at - 2] == ("Paired t-tests over shared seeds against learned (difference of test scores, "
                                   "encoding minus learned; p two-sided; Holm: p adjusted by Holm's correction over "
                                   "all pairs of the task). 6 pairs in all, "
                                   f"{sum(c['p'] < 0.05 for c in summary['comparisons'])} with p < 0.05 "
                                   f"({sum(c['p_holm'] < 0.05 for c in summary['comparisons'])} after Holm's correction "
                                   "within each task) (summary.json: comparisons).")
    shaw = pairs[("learned", "shaw")]
    assert lines[tests_at + 2] == (f"| shaw | {-shaw['mean_difference']:+.3f} (p {shaw['p']:.3f}, "
                                   f"Holm {shaw['p_holm']:.3f}) |")
    assert lines[tests_at + 2:tests_at + 5] == [line for line in lines if line.startswith(("| shaw", "| rope", "| none"))
                                                and "(p " in line]
    # --reference: the same tests shown against another encoding, the difference turned round where the
    # summary tested the pair the other way.
    against_rope = run("experiment", "report", out, "--markdown", "--reference", "rope")
    assert against_rope.returncode == 0, against_rope.stderr
    rope_lines = against_rope.stdout.splitlines()
    assert "Paired t-tests over shared seeds against rope (difference of test scores, encoding minus rope;" in \
        against_rope.stdout
    rope_pair = pairs[("learned", "rope")]
    assert (f"| learned | {rope_pair['mean_difference']:+.3f} (p {rope_pair['p']:.3f}, "
            f"Holm {rope_pair['p_holm']:.3f}) |") in rope_lines
    assert not any(line.startswith("| rope | ") and "(p " in line for line in rope_lines)
    unknown = run("experiment", "report", out, "--markdown", "--reference", "alibi")
    assert unknown.returncode != 0 and unknown.stdout == ""
    assert unknown.stderr.strip().splitlines()[-1].endswith(
        "[experiment] reference must be an encoding of the summary (learned, shaw, rope, none), got 'alibi'"), \
        unknown.stderr
    needs = run("experiment", "report", out, "--reference", "rope")
    assert needs.returncode != 0 and "--reference requires --markdown" in needs.stderr, needs.stderr
    pearson_p = correlation["pearson_p"]
    assert (f"| lexname | identical_word_attention.monotonicity | {correlation['pearson']:.2f} "
            f"(p {'< 0.001' if pearson_p < 0.001 else format(pearson_p, '.3f')}) | 1.00 (p 0.083) | 4 | "
            f"{correlation['pearson_without']['pearson']:.2f} ({correlation['pearson_without']['encoding']}) |"
            in lines)
    stops = lines.index("| stage | most steps | runs | stopped early | best at the most steps | median best step | "
                        "their last gain |")
    assert lines[stops + 2:stops + 4] == ["| pretrain | 20 | 12 | 0 | 0 | 10 | — |",
                                          "| lexname | 40 | 12 | 8 | 4 | 10 | 0.0250 |"]
    # The report reads the runs, never a stale summary.json.
    (out / "summary.json").write_text("{}")
    assert run("experiment", "report", out, "--markdown").stdout == md.stdout
    # A validation record that is not one is refused with its file and line.
    record = out / "runs" / "rope-s2" / "lexname" / "validation.jsonl"
    record.write_text(record.read_text() + '{"step": 60}\n')
    r = run("experiment", "report", out)
    assert (r.returncode, r.stderr) == (
        1, f"posenc: [experiment] {record}:3: not a validation line (a JSON object with step and score)\n")


def test_summary_fit_reads_the_curves_at_the_best_step(tmp_path):
    """Hand-written results and curves: the training-batch score over the evaluation interval ending at each run's
    best step, its mean over seeds beside the validation score's, the Markdown table, and a broken curve refused."""
    out = tmp_path / "suite"
    (out / "runs").mkdir(parents=True)
    (out / "suite.json").write_text('{"suite": "properties"}\n')
    best = {("learned", 0): 20, ("learned", 1): 40, ("shaw", 0): 30, ("shaw", 1): 40}
    for order, ((encoding, seed), best_step) in enumerate(best.items()):
        stages = [{"stage": "pretrain", "metric": "masked-LM loss", "best_step": 10, "last_step": 10,
                   "validation": 2.0, "test": 2.0, "test_count": 1, "seconds": 1, "tokens_per_second": 1},
                  {"stage": "lexname", "metric": "accuracy", "best_step": best_step, "last_step": 40,
                   "validation": 0.5 + 0.1 * order, "test": 0.5, "test_count": 1, "seconds": 1,
                   "tokens_per_second": 1}]
        result = {"format": "posenc-properties-run-1", "suite": "properties", "name": f"{encoding}-s{seed}",
                  "order": order, "encoding": encoding, "seed": seed, "stages": stages,
                  "probes": {"table": None, "identical_word_attention": None},
                  "config": {"finetune_stopping": [20, 2], "stages": [{"steps": 10}, {"steps": 40}]}}
        d = out / "runs" / f"{encoding}-s{seed}"
        (d / "lexname").mkdir(parents=True)
        (d / "result.json").write_text(json.dumps(result))
        if encoding == "learned":  # shaw's curves are not kept
            (d / "lexname" / "metrics.jsonl").write_text("".join(
                json.dumps({"step": step, "loss": 1.0, "accuracy": step / 100 + seed / 1000}) + "\n"
                for step in range(5, 45, 5)))
    summary = json.loads(run("experiment", "report", out, "--json").stdout)
    learned, shaw = summary["rows"][0]["scores"][0], summary["rows"][1]["scores"][0]
    # Seed 0: steps 5..20 (interval 20 ending at 20), seed 1: steps 25..40.
    seed0, seed1 = sum(s / 100 for s in (5, 10, 15, 20)) / 4, sum(s / 100 + 0.001 for s in (25, 30, 35, 40)) / 4
    assert math.isclose(learned["training_at_best"]["mean"], (seed0 + seed1) / 2, rel_tol=1e-12)
    assert math.isclose(learned["training_at_best"]["sd"], abs(seed1 - seed0) / math.sqrt(2), rel_tol=1e-12)
    assert math.isclose(learned["validation_at_best"]["mean"], (0.5 + 0.6) / 2, rel_tol=1e-12)
    assert "training_at_best" not in shaw and "validation_at_best" not in shaw
    md = run("experiment", "report", out, "--markdown").stdout.splitlines()
    fit = next(i for i, line in enumerate(md) if line.startswith("Fit of the reported checkpoints: "))
    assert md[fit].startswith("Fit of the reported checkpoints: the training-batch score logged over the "
                              "evaluation interval ending at the best step / the validation score there")
    assert md[fit + 2] == "| encoding | lexname |"
    assert md[fit + 4:fit + 6] == [f"| learned | {(seed0 + seed1) / 2:.2f} / 0.55 |", "| shaw | — |"]
    # Before it, each run's test score in seed order.
    per_run = md.index("Test scores per run, in seed order.")
    assert md[per_run + 2] == "| encoding | lexname |" and per_run < fit
    assert md[per_run + 4] == "| learned | " + ", ".join(f"{v:.3f}" for v in learned["values"]) + " |"

    # A curve that is not one is refused with its file and line, never read as a score.
    metrics = out / "runs" / "learned-s1" / "lexname" / "metrics.jsonl"
    metrics.write_text(metrics.read_text() + '{"step": 45}\n')
    r = run("experiment", "report", out)
    assert (r.returncode, r.stderr) == (
        1, f"posenc: [experiment] {metrics}:9: not a metrics line (a JSON object with step and accuracy)\n")
