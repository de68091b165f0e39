"""What the class study shows (lpips_explorer.study.present, access, prepare) and its chart (figures.study)."""

from __future__ import annotations

import base64
import csv
import datetime as dt
import io
import re
import urllib.parse

import numpy as np
import pytest
from PIL import Image

from lpips_core import metrics
from lpips_core.spec import MetricSpec, standard_specs
from lpips_explorer.figures.study import agreement_chart
from lpips_explorer.study import access, present, scoring
from lpips_explorer.study import prepare as P
from lpips_explorer.study import store as S
from lpips_explorer.study import triplets as T


def _png(value: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (value, value, value)).save(buf, format="PNG")
    return buf.getvalue()


# --------------------------------------------------------------------------- the triplet's HTML
def test_triplet_html_carries_the_three_pngs_in_order_nearest_neighbour():
    ref, a, b = _png(10), _png(20), _png(30)
    html = present.triplet_html(ref, a, b, index=4)
    srcs = re.findall(r'<img data-patch="(\w+)" alt="[^"]+" src="data:image/png;base64,([^"]+)"', html)
    assert [p for p, _ in srcs] == ["1", "ref", "2"]  # copy 1, the reference, copy 2, left to right
    assert [base64.b64decode(s) for _, s in srcs] == [a, ref, b]
    assert 'data-triplet="4"' in html and "image-rendering:pixelated" in html
    assert f"@container (max-width: {present.NARROW_PX}px)" in html  # the phone layout follows the column
    assert "--lx-max:min(360px, 40vh)" in html
    assert "--lx-max:min(440px, 52vh)" in present.triplet_html(ref, a, b, size="large")
    assert "<figcaption>a &amp; b</figcaption>" in present.triplet_html(ref, a, b, labels=("a & b", "R", "c"))
    with pytest.raises(ValueError, match="size must be"):
        present.triplet_html(ref, a, b, size="huge")
    # while answering: which drawing this is (the page's answer guard) and the height it may take
    answering = present.triplet_html(ref, a, b, index=4, draw=17, fit=present.ANSWER_FIT)
    assert 'data-draw="17"' in answering and "data-draw" not in html
    assert f"--lx-fit:{present.ANSWER_FIT.replace('svh', 'vh')};--lx-fit:{present.ANSWER_FIT}" in answering
    with pytest.raises(ValueError, match="labels"):
        present.triplet_html(ref, a, b, labels=("1", "2"))


# --------------------------------------------------------------------------- links and the QR code
def test_links():
    assert present.student_link("http://10.0.0.5:8501/", "AB3K9Z") == "http://10.0.0.5:8501/?study=AB3K9Z"
    assert present.student_link("https://host/base", "AB3K9Z") == "https://host/base/?study=AB3K9Z"
    assert present.student_link(None, "AB3K9Z") == "/?study=AB3K9Z"
    assert present.lecturer_link("http://h:1", "AB3K9Z", "k-e_y") == "http://h:1/judge_it_yourself?study=AB3K9Z&key=k-e_y"
    assert present.local_only("http://localhost:8501/?study=X") and present.local_only("http://127.0.0.1/")
    assert present.local_only("http://[::1]:8501/") and not present.local_only("http://192.168.1.20:8501/")


def test_the_qr_code_draws_segnos_matrix_of_the_link():
    """The SVG's dark modules (horizontal runs of its one path), read back into a matrix, are exactly
    segno's QR code of the link (error correction M, a 2-module quiet zone)."""
    import segno

    link = "http://192.168.1.20:8501/?study=AB3K9Z"
    uri = present.qr_svg_data_uri(link)
    assert uri.startswith("data:image/svg+xml")
    svg = urllib.parse.unquote(uri.split(",", 1)[1])
    size = int(re.search(r"width='(\d+)'", svg).group(1))
    assert "fill='#fff' d='M0 0h{0}v{0}h-{0}z'".format(size) in svg  # a white background under the code
    path = re.search(r"class='qrline' stroke='#000' d='([^']+)'", svg).group(1)
    drawn = np.zeros((size, size), dtype=bool)
    x = y = 0.0
    for op, a, b in re.findall(r"([Mmh])(-?[\d.]+)(?:\s(-?[\d.]+))?", path):
        if op == "M":
            x, y = float(a), float(b)
        elif op == "m":
            x, y = x + float(a), y + float(b)
        else:
            drawn[int(y), int(x):int(x + float(a))] = True
            x += float(a)
    qr = segno.make(link, error="m", micro=False)
    want = np.pad(np.array(qr.matrix, dtype=bool), 2)
    assert qr.error == "M" and drawn.shape == want.shape == (size, size)
    np.testing.assert_array_equal(drawn, want)


# --------------------------------------------------------------------------- texts
@pytest.mark.parametrize("votes, text", [
    ((0, 1, 0), "The one judge chose copy 2."),
    ((0, 0, 1), "The one judge could not tell."),
    ((0, 4, 0), "All 4 judges chose copy 2."),
    ((1, 2, 0), "Of 3 judges, 2 chose copy 2 and 1 chose copy 1."),
    ((3, 3, 1), "Of 7 judges, 3 chose copy 1, 3 chose copy 2 and 1 could not tell."),
    ((0, 0, 0), "No judge has answered it yet."),
])
def test_votes_text(votes, text):
    assert present.votes_text(votes) == text
    assert "100%" not in text and "1 judges" not in text


def test_judges_text_and_bad_votes():
    assert present.judges_text(1) == "1 judge" and present.judges_text(2) == "2 judges"
    with pytest.raises(ValueError, match="three counts"):
        present.votes_text((1, 2))


def test_reveal_rows_say_each_metrics_verdict_without_empty_cells():
    variants = [MetricSpec("mse"), MetricSpec("psnr"), MetricSpec("lpips", net="alex")]
    d = {"mse": (0.01, 0.02), "psnr": (20.0, 17.0), "lpips-alex-0.1-lin-[-1,1]": (0.3, 0.3)}
    rows = present.reveal_rows(d, variants, choice=1)  # the participant chose copy 2
    assert rows == [
        {"metric": "MSE", "copy 1": "0.01", "copy 2": "0.02", "closer": "1", "agrees": "no"},
        {"metric": "PSNR", "copy 1": "20", "copy 2": "17", "closer": "1", "agrees": "no"},
        {"metric": "LPIPS · AlexNet", "copy 1": "0.3", "copy 2": "0.3", "closer": "tie", "agrees": "—"},
    ]
    assert [r["agrees"] for r in present.reveal_rows(d, variants, choice=0)] == ["yes", "yes", "—"]
    assert [r["agrees"] for r in present.reveal_rows(d, variants, choice=2)] == ["—", "—", "—"]
    assert present.reveal_rows({"mse": (1.0, 2.0)}, variants, 0)[0]["metric"] == "MSE"  # missing keys skipped


def test_own_rows_put_you_beside_the_class_as_percentages():
    you = {"metrics": [{"key": "mse", "label": "MSE", "score": 2 / 3}, {"key": "x", "label": "X", "score": 0.5}]}
    klass = {"metrics": [{"key": "mse", "label": "MSE", "score": 0.755}]}
    assert present.own_rows(you, None) == [{"metric": "MSE", "agrees with you": "67%"},
                                           {"metric": "X", "agrees with you": "50%"}]
    assert present.own_rows(you, klass) == [
        {"metric": "MSE", "agrees with you": "67%", "agrees with the class": "76%"},
        {"metric": "X", "agrees with you": "50%", "agrees with the class": "—"}]
    assert present.own_rows(None, klass) == []


def test_the_answers_csv():
    when = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.timezone.utc)
    js = [S.Judgement("abc", 0, 1, 812, when), S.Judgement("def", 1, 2, None, when)]
    rows = list(csv.reader(io.StringIO(present.judgements_csv("AB3K9Z", js, ["blur", "noise"]))))
    assert rows == [["study", "participant", "triplet", "family", "choice", "answer", "response_ms", "time_utc"],
                    ["AB3K9Z", "abc", "1", "blur", "1", "2 is closer", "812", "2026-03-04T05:06:07+00:00"],
                    ["AB3K9Z", "def", "2", "noise", "2", "can't tell", "", "2026-03-04T05:06:07+00:00"]]


# --------------------------------------------------------------------------- tokens and keys
def test_tokens_and_the_admin_key():
    t = access.new_token()
    assert access.valid_token(t) and len(t) == 32 and t != access.new_token()
    pid = access.participant_id(t)
    assert re.fullmatch(r"[0-9a-f]{32}", pid) and pid == access.participant_id(t) and t not in pid
    for bad in ("short", "x" * 65, "has space in it!!!!!", None, 12):
        assert not access.valid_token(bad)
    with pytest.raises(ValueError, match="participant token"):
        access.participant_id("no")
    assert access.admin_ok(None, None) and access.admin_ok("", "anything")
    assert access.admin_ok("s3cret", "s3cret") and not access.admin_ok("s3cret", "s3cre")
    assert not access.admin_ok("s3cret", None) and not access.admin_ok("s3cret", "")
    with pytest.raises(TypeError, match="admin_key must be a string"):
        access.admin_ok(1234, "1234")
    assert S.key_hash("k") == "8254c329a92850f6d539dd376f4816ee2764517da5e0235514af433164480d7a"


# --------------------------------------------------------------------------- precomputing
def test_prepare_stores_the_shown_pixels_and_metrics_on_them():
    recipes = T.make_recipes(3, families=["noise-vs-blur"], seed=2)
    variants = [s for s in standard_specs() if not s.learned]
    seen = []
    done = P.prepare(recipes, variants, {}, progress=lambda k, n: seen.append((k, n)))
    assert seen == [(k, 6) for k in range(1, 7)]  # progress(done, total): three triplets, then three metrics
    for r, d in zip(recipes, done):
        t = T.render(r)
        assert d.recipe == r and d.digest == t.digest()
        ref, p0, p1 = (P.decode_png(p) for p in d.pngs)
        for shown, exact in ((ref, t.ref), (p0, t.p0), (p1, t.p1)):
            assert shown.shape == (64, 64, 3) and np.abs(shown - exact).max() <= 0.5 / 255 + 1e-6
        assert d.distances["mse"] == (metrics.mse(ref, p0), metrics.mse(ref, p1))
        assert d.distances["ssim"] == (metrics.ssim(ref, p0), metrics.ssim(ref, p1))
        assert set(d.distances) == {"mse", "psnr", "ssim"}


def test_a_learned_metric_without_a_model_is_left_out():
    recipes = T.make_recipes(1, families=["blur"], seed=0)
    done = P.prepare(recipes, [MetricSpec("mse"), MetricSpec("lpips", net="alex")], {})
    assert set(done[0].distances) == {"mse"}


# --------------------------------------------------------------------------- scoring additions
def test_votes_per_triplet_and_stored_distances():
    variants = [MetricSpec("mse")]
    judged = [("a", 0, 1), ("b", 0, 1), ("c", 0, 0), ("a", 1, 2)]
    res = scoring.summarize({"mse": ([0.1, 0.2], [0.2, 0.1])}, ["f", "f"], judged, variants, n_boot=10)
    assert [(p["index"], p["votes"], p["n"]) for p in res["per_triplet"]] == [(0, [1, 2, 0], 3), (1, [0, 0, 1], 1)]
    d = scoring.stored_distances([{"x": (1.0, 2.0), "y": (0.0, 1.0)}, {"x": (3.0, 4.0)}])
    assert list(d) == ["x"] and d["x"][0].tolist() == [1.0, 3.0] and d["x"][1].tolist() == [2.0, 4.0]
    assert scoring.stored_distances([]) == {}
    with pytest.raises(ValueError, match=r"triplet\(s\) \[1\]"):
        scoring.stored_distances([{"x": (1.0, 2.0)}, None])


# --------------------------------------------------------------------------- the chart
def _block():
    return {"metrics": [
        {"key": "mse", "label": "MSE", "score": 0.55, "low": 0.4, "high": 0.7, "n": 12},
        {"key": "lpips-alex", "label": "LPIPS · AlexNet", "score": 0.8, "low": 0.7, "high": 0.9, "n": 12},
        {"key": "ssim", "label": "SSIM", "score": 0.6, "low": 0.5, "high": 0.72, "n": 12},
        {"key": "dists-vgg", "label": "DISTS · VGG16", "score": float("nan"), "low": float("nan"),
         "high": float("nan"), "n": 0}],
        "ceiling": {"key": "ceiling", "label": "Human ceiling", "score": 0.78, "low": 0.71, "high": 0.85, "n": 12}}


def test_agreement_chart_draws_scores_intervals_and_the_ceiling_band():
    fig = agreement_chart(_block(), n_judges=9)
    learned, classic = fig.data
    assert learned.name == "learned metrics" and list(learned.y) == ["LPIPS · AlexNet"]
    assert list(learned.x) == [0.8] and list(learned.error_x.array) == pytest.approx([0.1])
    assert list(learned.error_x.arrayminus) == pytest.approx([0.1])
    assert list(classic.y) == ["SSIM", "MSE"] and list(classic.x) == [0.6, 0.55]
    assert list(classic.error_x.array) == pytest.approx([0.12, 0.15])
    assert list(fig.layout.yaxis.categoryarray) == ["MSE", "SSIM", "LPIPS · AlexNet"]  # best at the top
    band = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(band) == 1 and (band[0].x0, band[0].x1) == (0.71, 0.85)
    lines = sorted(s.x0 for s in fig.layout.shapes if s.type == "line")
    assert lines == [0.5, 0.78]  # chance and the ceiling
    texts = [a.text for a in fig.layout.annotations]
    assert "human ceiling 0.78" in texts and "chance" in texts
    assert fig.layout.title.text == "Agreement with the class (2AFC) · 9 judges"
    assert tuple(fig.layout.xaxis.range) == (0.3, 1.0) and fig.layout.height == 56 + 48 + 26 * 3
    assert fig.layout.margin.l == 190 and fig.layout.showlegend is False
    assert agreement_chart(_block(), n_judges=1).layout.title.text.endswith("· 1 judge")
    with pytest.raises(ValueError, match="no scored metric"):
        agreement_chart({"metrics": [], "ceiling": None})


def test_the_compact_chart_keeps_every_name_inside_the_plot():
    """For a phone: no left margin for names; each name an annotation above its dot, inside the plot."""
    fig = agreement_chart(_block(), n_judges=9, compact=True)
    assert fig.layout.margin.l == 8 and fig.layout.yaxis.showticklabels is False
    names = [a for a in fig.layout.annotations if a.xref == "x" and a.yref == "y"]
    assert sorted(a.text for a in names) == ["LPIPS · AlexNet", "MSE", "SSIM"]
    assert all(a.x == fig.layout.xaxis.range[0] and a.xanchor == "left" for a in names)
    assert "ceiling 0.78" in [a.text for a in fig.layout.annotations]
    assert fig.layout.title.text == "Agreement with the class · 9 judges" and fig.layout.height == 56 + 48 + 40 * 3
