// report.html: one self-contained page (figures as data: URIs, inline CSS,
// no external reference), in the order summary, how to read, sections,
// references.
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "experiments_internal.h"
#include "html_text.h"
#include "posenc/report/report.h"

namespace posenc::report {
namespace {

using detail::base64;

std::string escape(std::string_view text) { return detail::escape_html(text); }

std::string fixed(double v, const char* format = "%.4f") {
  if (!std::isfinite(v)) return "n/a";
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

std::string monotone_text(const analysis::MonotoneRange& m) {
  return (m.all_censored ? "&ge; " : "") + std::to_string(m.range);
}

constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 2em auto; max-width: 1240px; color: #222; line-height: 1.45; padding: 0 1em; }
h1 { margin-bottom: 0.2em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
h3 { margin-top: 1.8em; }
table { border-collapse: collapse; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.55em; text-align: right; white-space: nowrap; }
td.text { white-space: normal; }
th { background: #f2f2f2; }
td.name, th.name, td.text { text-align: left; }
tr.missing td { color: #888; }
.badge { font-size: 0.8em; padding: 0.05em 0.45em; border-radius: 0.6em; background: #fde9c8; color: #8a5200; margin-left: 0.5em; }
.note { background: #f4f4f4; border-left: 4px solid #aaa; padding: 0.4em 0.8em; }
.meta { color: #555; }
figure { display: inline-block; width: 32%; margin: 0.5em 0.5% 0.5em 0; vertical-align: top; }
figure img { display: block; width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: 0.85em; color: #555; }
code, .formula { font-family: monospace; }
.formula { display: block; margin: 0.3em 0 0.3em 1.5em; }
)";

// The indicators' definitions (docs/report.md has the long form).
constexpr const char* kHowToRead = R"(
<p>Every encoding is reduced to a matrix <i>S</i> indexed by positions: for a table <i>PE</i> [N, D]
the dot proximity <span class="formula">S[i, j] = PE[i] &middot; PE[j]</span> (Wang et al. 2021);
for an attention bias the bias averaged over heads; for relative vectors and trained models the
first layer's attention when every token is the same word (identical-word probing, Wang &amp; Chen 2020),
averaged over words and heads. W is the window of offsets (N &minus; 1 here).</p>
<dl>
<dt><b>monotonicity</b> (&minus;1 .. 1)</dt>
<dd>Does S fall as the offset grows? For each row x and direction s = &plusmn;1, the Spearman rank
correlation &rho; of (m, S[x, x + s&middot;m]) over m = 1 .. W;
<span class="formula">monotonicity = &minus; mean &rho;</span>
1: proximity falls strictly with distance everywhere; 0: no trend; &minus;1: it rises.</dd>
<dt><b>translation invariance</b> (0 .. 1)</dt>
<dd>How much of S is a function of the offset j &minus; i alone: the share of S's variance (within the
band |j &minus; i| &le; W) explained by the offset,
<span class="formula">1 &minus; &Sigma;(S &minus; mean of its diagonal)&sup2; / &Sigma;(S &minus; mean)&sup2;</span>
1 for constant diagonals (a Toeplitz matrix).</dd>
<dt><b>symmetry</b> (&minus;1 .. 1)</dt>
<dd>Is looking forward the same as looking back? Lin's concordance correlation of the pairs
(S[x, x + m], S[x, x &minus; m]):
<span class="formula">2 cov(a, b) / (var a + var b + (mean a &minus; mean b)&sup2;)</span>
1 exactly when S[x, x + m] = S[x, x &minus; m] for every pair: each position sees the same proximity ahead as behind.</dd>
<dt><b>monotone range</b></dt>
<dd>The largest offset m such that S[x, x + k] &lt; S[x, x + k &minus; 1] for every k &le; m, the median
over rows x. &ge; marks a range censored by the table's end (S still falls there).</dd>
<dt><b>translation residual</b> (&ge; 0)</dt>
<dd>Is there a linear map T(&Delta;) with PE[p + &Delta;] = T(&Delta;) PE[p]? The relative error
<span class="formula">r(&Delta;) = &#8214;Y &minus; X T(&Delta;)&#7488;&#8214; / &#8214;Y&#8214;, X = PE[0 .. N&minus;1&minus;&Delta;], Y = PE[&Delta; .. N&minus;1]</span>
maximised over &Delta; = 1, 2, 4, .. N/4. <i>exact</i>: the known rotation of the sinusoid or RoPE
(r &asymp; 1e&minus;15); <i>least-squares</i>: the best T fitted by ridge regression and judged on held-out
positions (5 folds), so a large table cannot fit noise. 0: perfectly translatable; 1: no better than T = 0;
above 1: the fitted map does worse than T = 0 on held-out positions, as a fit of noise does when D is close to N.</dd>
<dt><b>absolute MAE</b> (positions)</dt>
<dd>Probe of Wang &amp; Chen: ridge regression from PE[p] to p, 5-fold cross-validation, mean
|round(p&#770;) &minus; p| on held-out positions. 0: the table encodes p linearly; about N/4 (the error of always guessing the mean): not at all.</dd>
<dt><b>relative error</b> (0 .. 1)</dt>
<dd>Probe of Wang &amp; Chen: logistic regression on [PE[i], PE[j]] predicting whether i &lt; j, 5-fold
held-out error rate. 0: order is linearly readable; 0.5: chance.</dd>
</dl>
<p>n/a: the number needs a table (attention biases and attention maps have none), or the section
could not be built (its note says why).</p>
)";

constexpr const char* kReferences = R"(
<ol>
<li>A. Vaswani et al. Attention is all you need. NeurIPS 2017.</li>
<li>B. Wang, L. Shang, C. Lioma, X. Jiang, H. Yang, Q. Liu, J. G. Simonsen. On position embeddings in BERT. ICLR 2021.</li>
<li>Y.-A. Wang, Y.-N. Chen. What do position embeddings learn? An empirical study of pre-trained language model positional encoding. EMNLP 2020.</li>
<li>J. Su, Y. Lu, S. Pan, A. Murtadha, B. Wen, Y. Liu. RoFormer: enhanced transformer with rotary position embedding. 2021.</li>
<li>Y. Sun et al. A length-extrapolatable transformer (xPos). 2022.</li>
<li>B. Heo, S. Park, D. Han, S. Yun. Rotary position embedding for vision transformer. 2024.</li>
<li>O. Press, N. A. Smith, M. Lewis. Train short, test long: attention with linear biases enables input length extrapolation. ICLR 2022.</li>
<li>C. Raffel et al. Exploring the limits of transfer learning with a unified text-to-text transformer. JMLR 2020.</li>
<li>P. Shaw, J. Uszkoreit, A. Vaswani. Self-attention with relative position representations. NAACL 2018.</li>
<li>Z. Dai, Z. Yang, Y. Yang, J. Carbonell, Q. V. Le, R. Salakhutdinov. Transformer-XL: attentive language models beyond a fixed-length context. ACL 2019.</li>
<li>J. Wei et al. NEZHA: neural contextualized representation for Chinese language understanding. 2019.</li>
<li>A. Srinivas, T.-Y. Lin, N. Parmar, J. Shlens, P. Abbeel, A. Vaswani. Bottleneck transformers for visual recognition. CVPR 2021.</li>
<li>N. Carion et al. End-to-end object detection with transformers (DETR). ECCV 2020.</li>
<li>L. I.-K. Lin. A concordance correlation coefficient to evaluate reproducibility. Biometrics 1989.</li>
</ol>
)";

struct Row {
  std::string monotonicity = "n/a", invariance = "n/a", symmetry = "n/a", range = "n/a", residual = "n/a",
              mae = "n/a", relative = "n/a";
};

Row row_of(const Section& sec) {
  Row r;
  const MatrixAnalysis* m = sec.table ? &sec.table->properties : sec.matrix ? &*sec.matrix : nullptr;
  if (m) {
    r.monotonicity = fixed(m->indicators.monotonicity);
    r.invariance = fixed(m->indicators.translation_invariance);
    r.symmetry = fixed(m->indicators.symmetry);
    r.range = monotone_text(m->monotone);
  }
  if (sec.table && sec.table->translation) {
    r.residual = fixed(sec.table->translation->max_residual, "%.2e") + " <small>(" +
                 escape(sec.table->translation->method) + ")</small>";
  }
  if (sec.table && sec.table->probes) {
    r.mae = fixed(sec.table->probes->absolute_mae, "%.2f");
    r.relative = fixed(sec.table->probes->relative_error, "%.3f");
  }
  return r;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "";
  std::string s = "[";
  for (size_t k = 0; k < shape.size(); ++k) s += (k ? " x " : "") + std::to_string(shape[k]);
  return s + "]";
}

void write_summary(std::ostringstream& h, const Report& report) {
  h << "<table>\n<tr><th class=\"name\">encoding</th><th class=\"name\">kind</th><th>shape</th>"
       "<th>monotonicity</th><th>translation<br>invariance</th><th>symmetry</th><th>monotone<br>range</th>"
       "<th>translation<br>residual</th><th>absolute<br>MAE</th><th>relative<br>error</th></tr>\n";
  for (const Section& sec : report.sections) {
    const Row r = row_of(sec);
    const bool missing = !sec.table && !sec.matrix;
    h << "<tr" << (missing ? " class=\"missing\"" : "") << "><td class=\"name\"><a href=\"#" << sec.id << "\">"
      << escape(sec.name) << "</a>" << (sec.untrained ? " <small>(untrained)</small>" : "")
      << "</td><td class=\"name\">" << section_group_name(sec.group) << "</td><td>" << shape_text(sec.shape)
      << "</td><td>" << r.monotonicity << "</td><td>" << r.invariance << "</td><td>" << r.symmetry << "</td><td>"
      << r.range << "</td><td>" << r.residual << "</td><td>" << r.mae << "</td><td>" << r.relative << "</td></tr>\n";
  }
  h << "</table>\n";
}

void write_section(std::ostringstream& h, const Section& sec) {
  h << "<section id=\"" << sec.id << "\">\n<h3>" << escape(sec.name) << " <small class=\"meta\">"
    << section_group_name(sec.group) << "</small>" << (sec.untrained ? "<span class=\"badge\">untrained</span>" : "")
    << "</h3>\n";
  h << "<p>" << escape(sec.description) << "</p>\n";
  if (!sec.shape.empty()) {
    h << "<p class=\"meta\">shape " << shape_text(sec.shape) << "; S = " << escape(sec.matrix_label) << "</p>\n";
  }
  if (!sec.note.empty()) h << "<p class=\"note\">" << escape(sec.note) << "</p>\n";
  const MatrixAnalysis* m = sec.table ? &sec.table->properties : sec.matrix ? &*sec.matrix : nullptr;
  if (m) {
    const Row r = row_of(sec);
    const analysis::MonotoneRange& mr = m->monotone;
    h << "<table>\n";
    h << "<tr><td class=\"text\">monotonicity</td><td>" << r.monotonicity << "</td></tr>\n";
    h << "<tr><td class=\"text\">translation invariance</td><td>" << r.invariance << "</td></tr>\n";
    h << "<tr><td class=\"text\">symmetry</td><td>" << r.symmetry << "</td></tr>\n";
    h << "<tr><td class=\"text\">window W</td><td>" << m->indicators.window << "</td></tr>\n";
    h << "<tr><td class=\"text\">monotone range (per row: min " << mr.min << ", max " << mr.max << ", mean "
      << fixed(mr.mean, "%.1f") << "; " << mr.uncensored_rows << " rows uncensored)</td><td>" << r.range
      << "</td></tr>\n";
    if (sec.table && sec.table->translation) {
      const analysis::TranslationResidual& t = *sec.table->translation;
      h << "<tr><td class=\"text\">translation residual, " << escape(t.method) << " (&Delta; = ";
      for (size_t k = 0; k < t.deltas.size(); ++k) {
        h << (k ? ", " : "") << t.deltas[k] << ": " << fixed(t.residuals[k], "%.2e");
      }
      h << ")</td><td>" << fixed(t.max_residual, "%.2e") << "</td></tr>\n";
    } else {
      h << "<tr><td class=\"text\">translation residual</td><td>n/a</td></tr>\n";
    }
    if (sec.table && sec.table->probes) {
      const analysis::ProbeResult& p = *sec.table->probes;
      h << "<tr><td class=\"text\">absolute probe MAE (" << p.folds << " folds, seed " << p.seed << ")</td><td>"
        << r.mae << "</td></tr>\n";
      h << "<tr><td class=\"text\">relative probe error (" << p.pairs << " pairs)</td><td>" << r.relative
        << "</td></tr>\n";
    } else {
      h << "<tr><td class=\"text\">absolute probe MAE</td><td>n/a</td></tr>\n"
        << "<tr><td class=\"text\">relative probe error</td><td>n/a</td></tr>\n";
    }
    h << "</table>\n";
  }
  for (const Figure& f : sec.figures) {
    h << "<figure><img alt=\"" << escape(sec.name + ": " + f.caption) << "\" src=\"data:image/png;base64,"
      << base64(f.png) << "\"><figcaption>" << escape(f.caption) << "</figcaption></figure>\n";
  }
  h << "</section>\n";
}

}  // namespace

std::string report_html(const Report& report) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>posenc report</title>\n<style>"
    << kStyle << detail::kExperimentStyle << "</style>\n</head>\n<body>\n";
  h << "<h1>posenc report</h1>\n<p class=\"meta\">posenc " << escape(report.version) << "; built-in families at N = "
    << report.positions << " positions, D = " << report.dim << " dimensions; seed " << report.options.seed
    << (report.options.quick ? "; <b>--quick</b> (small sizes, no model building)" : "")
    << (report.torch_layer ? "" : "; built without the torch layer") << "</p>\n";
  h << "<h2>Summary</h2>\n";
  write_summary(h, report);
  h << "<h2>How to read the numbers</h2>\n" << kHowToRead;
  h << "<h2>Encodings</h2>\n";
  for (const Section& sec : report.sections) write_section(h, sec);
  if (!report.experiments.empty()) {
    h << "<h2>Experiments</h2>\n";
    for (const ExperimentSection& e : report.experiments) h << e.html;
  }
  h << "<h2>References</h2>\n" << kReferences << detail::kImagesLoadedScript << "</body>\n</html>\n";
  return h.str();
}

}  // namespace posenc::report
