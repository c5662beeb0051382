"""Guided experiments: a question a learner answers by doing one thing, as data (docs/DESIGN.md, "Guided experiments").

An Experiment names its page, the values its button sets (a SpecConfig field by its name, which the sidebar shows
for every page, or "<page>.<name>" for the page's own widgets; ui/settings.py maps a field to its widget), whether the
button also starts the page's run, what to look for once it has run, and why. PAGES is the one table of pages: each
page's path and title (app.py's navigation reads it) and the name its experiments use. A page adds experiments by
adding an entry to EXPERIMENTS; the ten-minute path (PATH) is an ordered list of experiment ids across pages. The
numbers quoted are the built-in pair's recorded runs in assets/ (assets/heads/*_cpu.json, assets/batching_cpu.json,
assets/learning/) or docs/DESIGN.md, "Guided experiments".
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from specviz import ASSETS
from specviz.decoding.config import SpecConfig
from specviz.drafters.eagle import EagleDrafter
from specviz.drafters.medusa import MedusaDrafter
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.lessons import side_channel as side
from specviz.lessons.prompts import read_prompts

PROMPTS_FILE = ASSETS / "prompts.json"
MODEL, NGRAM, MEDUSA, EAGLE = (cls.name for cls in (ModelDrafter, NgramDrafter, MedusaDrafter, EagleDrafter))
CONFIG_FIELDS = frozenset(f.name for f in fields(SpecConfig))  # what an experiment may set in the sidebar


@dataclass(frozen=True)
class Page:
    path: str  # the page's file, from the repository's root
    title: str  # in the navigation, and where an experiment names its page
    icon: str  # the navigation's
    name: str = ""  # the name its experiments (and its widgets' keys) use; "": a page without experiments


PAGES = (  # app.py's navigation, in its order (the first is the home page)
    Page("pages/step_through.py", "Step through", ":material/footprint:", "step"),
    Page("pages/race.py", "Race", ":material/sports_score:", "race"),
    Page("pages/theory.py", "Theory", ":material/functions:", "theory"),
    Page("pages/acceptance_lab.py", "Acceptance lab", ":material/science:", "lab"),
    Page("pages/lossless.py", "Lossless", ":material/verified:", "lossless"),
    Page("pages/heads.py", "Heads", ":material/hub:", "heads"),
    Page("pages/learning.py", "Learning", ":material/trending_up:", "learning"),
    Page("pages/batching.py", "Batching", ":material/stacks:", "batching"),
    Page("pages/your_server.py", "Your server", ":material/monitoring:"),
)
PAGE_FILES = {p.name: p.path for p in PAGES if p.name}  # the pages with experiments, by the name they use
PAGE_TITLES = {p.name: p.title for p in PAGES if p.name}


def _example(category: str, index: int = 0) -> str:
    """An example prompt of assets/prompts.json (read by the picker's own checked reader), so that an experiment's
    prompt is one the picker offers."""
    return read_prompts(PROMPTS_FILE)[category][index]


CODE = _example("code")
PROSE = _example("prose")
TRANSLATION = _example("translation")
RENAME = _example("repetition")
GREEDY_DEFAULTS = (
    ("gamma", 5),
    ("schedule", "constant"),
    ("temperature", 0.0),
    ("drafter", MODEL),
    ("lookahead", 0),
    ("alternatives", 0),
    ("draft_confidence", 0.0),
)


@dataclass(frozen=True)
class Experiment:
    id: str  # unique; the button's key is "<page>.exp_<id>"
    page: str  # a key of PAGE_FILES
    question: str
    settings: tuple[tuple[str, object], ...]  # (a SpecConfig field or "<page>.<widget>", value) pairs the button sets
    observe: str  # what the learner should see, revealed once the experiment has run
    reason: str  # why
    run: bool = True  # the button also starts the page's run (False: the page reacts to the settings at once)

    def __post_init__(self) -> None:
        for name, _ in self.settings:
            if not (is_config(name) or name.startswith(f"{self.page}.")):
                raise ValueError(f"experiment {self.id}: {name!r} is neither a SpecConfig field nor this page's")

    @property
    def values(self) -> dict[str, object]:
        return dict(self.settings)

    @property
    def config(self) -> dict[str, object]:
        """The SpecConfig fields it sets (in the sidebar, for every page)."""
        return {name: value for name, value in self.settings if is_config(name)}


def is_config(name: str) -> bool:
    """Whether an experiment's setting names a SpecConfig field (else it is one of its page's widgets)."""
    return name in CONFIG_FIELDS


SETTING_NAMES = dict(  # how a setting's key reads on screen
    gamma="γ", g="γ", gamma_max="largest γ", draft_confidence="draft-confidence stop", max_new_tokens="max new tokens",
    kind="kind of heads", count="number of heads", per="prompts per category", temps="temperatures",
    broken="break the algorithm", n="samples", sizes="batch sizes", tokens="tokens per row", shown="result shown",
    what="run", baseline="also time plain decoding",
)  # fmt: skip


def changes_words(experiment: Experiment) -> str:
    """What the experiment's button sets, said plainly: the sidebar's settings (every page reads them) apart from
    this page's own."""
    sidebar, page = [], []
    for name, value in experiment.settings:
        widget = name.partition(".")[2] or name
        shown = "a prompt from the examples" if widget in ("prompt", "request") else value
        if isinstance(shown, list):
            shown = ", ".join(str(v) for v in shown)
        if isinstance(shown, bool):
            shown = "on" if shown else "off"
        (sidebar if is_config(name) else page).append(f"{SETTING_NAMES.get(widget, widget)} = {shown}")
    parts = []
    if page:
        parts.append("on this page " + ", ".join(page))
    if sidebar:
        parts.append("in the sidebar, for every page, " + ", ".join(sidebar))
    return "Sets " + "; and ".join(parts) + "." if parts else "Sets nothing."


def _with(base: tuple[tuple[str, object], ...], **changes: object) -> tuple[tuple[str, object], ...]:
    """base with SpecConfig fields changed: `_with(GREEDY_DEFAULTS, temperature=1.2)`."""
    return tuple({**dict(base), **changes}.items())


STEP = (
    Experiment(
        "prose_defaults",
        "step",
        "Run a prose prompt at the sidebar's defaults (γ 5, greedy): how many drafted tokens are kept, and does it "
        "beat plain decoding?",
        _with(GREEDY_DEFAULTS) + (("step.prompt", PROSE), ("step.baseline", True)),
        "Read your run's Acceptance rate and Speed-up in its results below, beside the code prompt's recorded rate.",
        "The 0.5B draft agrees with the 1.5B target on the obvious next token of code, but prose has many good next "
        "words and the two models pick different ones; every rejected guess is a draft forward wasted.",
    ),
    Experiment(
        "temperature",
        "step",
        "Set the temperature to 1.2 on a code prompt: what happens to the acceptance rate, and why?",
        _with(GREEDY_DEFAULTS, temperature=1.2) + (("step.prompt", CODE), ("step.baseline", True)),
        "Read your run's Acceptance rate below; each chip now shows its draw u against min(1, p/q), and a "
        "rejection is followed by a token drawn from the residual (↻).",
        "With sampling a guess d ~ q is kept with probability min(1, p(d)/q(d)), so the expected acceptance is "
        "Σ min(p, q) = 1 − TV(p, q): the overlap of the two whole distributions, not agreement on the top token. "
        "Heat flattens both; where the two models spread their mass alike the overlap stays high, and where the "
        "greedy choice was a near tie it can even rise. A few dozen tokens are a small sample: rerun with "
        "another seed and the rate moves by several points.",
    ),
    Experiment(
        "ngram_rename",
        "step",
        "Switch to the n-gram drafter on a task that repeats the prompt (a rename): which rounds keep its guesses?",
        _with(GREEDY_DEFAULTS, drafter=NGRAM) + (("step.prompt", RENAME), ("step.baseline", True)),
        "Step with Next through the rounds: a round inside the copied code keeps guesses; "
        "where the answer leaves the prompt a round finds nothing to copy.",
        "The n-gram drafter copies what followed the last occurrence of the current words: no model, no cost, "
        "and right exactly where the answer repeats its prompt.",
    ),
)

RACE = (
    Experiment(
        "identical",
        "race",
        "Race in greedy mode: are the two texts the same, token for token?",
        _with(GREEDY_DEFAULTS) + (("race.prompt", CODE),),
        "Look at the identity check under the race.",
        "In greedy mode a guess is kept only if it is the target's top token, and a rejection is replaced by that "
        "top token: every token is the one plain decoding would have written.",
    ),
    Experiment(
        "prose_long",
        "race",
        "Race a prose prompt with a long draft (γ 8): who wins?",
        _with(GREEDY_DEFAULTS, gamma=8) + (("race.prompt", PROSE),),
        "Read the race's Speed-up, its mean acceptance length and what a verify pass cost.",
        "A round drafts 8 tokens, which together cost more than a target step on a CPU, and keeps few of them; "
        "on the Theory page γ 8 pays with the measured times only when most of its guesses are kept.",
    ),
    Experiment(
        "rename_auto",
        "race",
        "Race the rename task with the auto schedule and 8 lookup guesses per draft pass: how large is the speed-up?",
        _with(GREEDY_DEFAULTS, schedule="auto", lookahead=8) + (("race.prompt", RENAME),),
        "Read the race's Speed-up, its mean acceptance length and what a verify pass cost; the auto "
        "schedule sets each draft's length from the times it measures.",
        "The answer copies the prompt, so prompt lookup guesses long runs right, the draft agrees with it at the "
        "cost of one pass, and the auto schedule drafts long while the draft is confident.",
    ),
)

THEORY = (
    Experiment(
        "gamma8_threshold",
        "theory",
        "At what a does γ 8 stop paying with the recorded verify costs?",
        (("theory.g", 8), ("theory.c", 0.16), ("theory.a", 0.61)),
        "Read the two speed-ups beside the sliders, and move a to find where the measured one crosses 1×.",
        "Eight drafts cost 8·c, more than a whole target step, per round, and the verify pass over all of them "
        "costs more than one step on a CPU; only a round that keeps most of its guesses earns that back.",
        run=False,
    ),
    Experiment(
        "cheap_draft",
        "theory",
        "A cheap, accurate draft (a = 0.9, c = 0.05): what is the best γ?",
        (("theory.a", 0.9), ("theory.c", 0.05), ("theory.g", 13)),
        "Read the Optimal γ beside the sliders.",
        "When a draft token costs little and is usually right, each extra guess still adds expected tokens "
        "(a^γ shrinks slowly at a = 0.9) for a small cost; the optimum moves out.",
        run=False,
    ),
    Experiment(
        "prose_gamma",
        "theory",
        "With a prose-like acceptance (a = 0.6) and the recorded c: does a longer draft help?",
        (("theory.a", 0.6), ("theory.c", 0.16), ("theory.g", 8)),
        "Compare the Speed-up at this γ with the one at the Optimal γ beside the sliders.",
        "At a = 0.6 a draft of γ tokens is fully accepted with probability 0.6^γ: guesses after the first few "
        "are almost always thrown away, but each still costs c.",
        run=False,
    ),
)

LAB = (
    Experiment(
        "lab_temperature",
        "lab",
        "Greedy against temperature 1.0, on code and on prose: which keeps more drafts?",
        (
            ("lab.categories", ["code", "prose"]),
            ("lab.per", 1),
            ("lab.temps", [0.0, 1.0]),
            ("lab.drafters", [MODEL]),
            ("lab.schedules", ["constant"]),
        ),
        "Read the acceptance rate column of the table, code against prose at each temperature.",
        "The text decides most: code has one obvious next token far more often than prose. The temperature "
        "changes the test (greedy: the two top tokens agree; sampling: kept with probability min(1, p/q), "
        "on average the overlap Σ min(p, q)), and the overlap can be as large as the top-token agreement.",
    ),
    Experiment(
        "lab_ngram",
        "lab",
        "The n-gram drafter against the draft model, on repetition and on prose: where does copying win?",
        (
            ("lab.categories", ["repetition", "prose"]),
            ("lab.per", 1),
            ("lab.temps", [0.0]),
            ("lab.drafters", [MODEL, NGRAM]),
            ("lab.schedules", ["constant"]),
        ),
        "Read the table's tokens / s, each drafter on the same prompt.",
        "Prompt lookup can only guess text that already occurred; a rename or a spelling fix repeats its prompt, "
        "prose does not. Its guesses cost no model, so even a low rate can pay where the draft model's cannot.",
    ),
    Experiment(
        "lab_position",
        "lab",
        "Along a draft of γ 5: which position is accepted most often?",
        (
            ("lab.categories", ["code", "prose", "translation", "repetition", "math"]),
            ("lab.per", 1),
            ("lab.temps", [0.0]),
            ("lab.drafters", [MODEL]),
            ("lab.schedules", ["constant"]),
            ("gamma", 5),
        ),
        "Open the By draft position tab: the share of checked guesses kept at each position.",
        "The theory assumes one rate a for every position. Real drafts are conditioned on the guesses before "
        "them: a guess is checked only if all before it were kept, and those rounds are the predictable ones.",
    ),
)

LOSSLESS = (
    Experiment(
        "broken",
        "lossless",
        "Turn on Break the algorithm: which bar moves, and why does the residual fix it?",
        (("lossless.broken", True),),
        "Compare TV(speculative, p) with the noise floor and with TV(draft alone, p).",
        "Redrawing from q after a rejection gives q's shape a second time, so the tokens the draft over-weights "
        "come out too often. The residual norm(max(0, p − q)) adds exactly the mass the accepted draws miss: "
        "min(p, q) + (p − q)⁺ = p.",
        run=False,
    ),
    Experiment(
        "few_samples",
        "lossless",
        "Draw only 1,000 samples: is the speculative histogram still as close to p as direct samples are?",
        (("lossless.n", 1_000), ("lossless.broken", False)),
        "Compare TV(speculative, p) with TV(direct samples of p, p).",
        "The speculative samples follow p exactly, so they are exactly as noisy as direct samples of p: "
        "TV of n samples shrinks like 1/√n for both.",
        run=False,
    ),
    Experiment(
        "alternatives",
        "lossless",
        "Allow 2 alternatives after a rejection: does the chance that a draft token is kept go up, and is the "
        "result still p?",
        (("lossless.alternatives", 2), ("lossless.broken", False)),
        "Compare P(kept) with P(accept), and TV(speculative, p) with the noise floor.",
        "Each further candidate c ~ q is kept with probability min(1, r(c)/q(c)), r what the rejections left of "
        "p: the same step with r in place of p, so the argument that makes one step exact holds again.",
        run=False,
    ),
)

HEADS = (
    Experiment(
        "heads_medusa_k",
        "heads",
        "Which Medusa head is most accurate, and why does accuracy fall with k?",
        (("heads.kind", MEDUSA), ("heads.count", 4)),
        "Read each head's accuracy on held-out answers.",
        "Every head reads the same h_t, the state at the last token, and head k must guess k + 1 positions on "
        "without seeing the k tokens in between: each unseen token multiplies the ways the text can go on. Only "
        "the first guesses of a draft are usually kept, so a long Medusa draft buys little.",
        run=False,
    ),
    Experiment(
        "heads_medusa_eagle",
        "heads",
        "Medusa or EAGLE: which one's first guess is better, and what does each see?",
        (("heads.kind", EAGLE),),
        "Compare EAGLE's first guess with Medusa's first head.",
        "Both guess the same token, the one after the target's next. Medusa's head sees only h_t; EAGLE's layer "
        "sees the feature f_t and the token the target just chose, and then runs again on its own guess, so its "
        "later guesses see the ones before them, where Medusa's later heads are blind (their accuracy falls fast: "
        "the first question above). The recording measures EAGLE's first guess only; one small layer trained for a "
        "few minutes has learnt a little more from the extra input than Medusa's head: with this little data, data "
        "is the limit for both.",
        run=False,
    ),
    Experiment(
        "heads_lossless",
        "heads",
        "Why does sampling with the heads stay lossless while Medusa's typical acceptance is not?",
        (("heads.kind", MEDUSA),),
        "Nothing to read off a chart here: the answer is in the rule.",
        "min(p, q) + (p − q)⁺ = p whatever q is, so a head, however weak, changes only the speed; a token the "
        "head cannot propose (q = 0) is still reached through the residual, which equals p there. Typical "
        "acceptance keeps every token the target finds plausible enough, so the text follows a truncated, "
        "reweighted p: tokens above the threshold come out more often than p says, the rest less.",
        run=False,
    ),
)

BATCHING_SHOWN = (("gamma", 4), ("batching.sizes", "1,2,4,8,16"), ("batching.tokens", 16), ("batching.shown", "cpu"))

BATCHING = (
    Experiment(
        "batching_break_even",
        "batching",
        "At which batch size does speculation at γ = 4 stop paying on the recorded CPU, and is it the verify's cost or "
        "acceptance?",
        BATCHING_SHOWN,
        "Read the speed-up at each batch size in the table, and the reading above it.",
        "Rows still decoding commit about as many tokens per row per round as alone (the table's two columns); a "
        "round gives less only as finished rows wait for the batch's last ones. The verify's cost grows with B: a "
        "forward is flat only over a few tokens on a CPU, and at four rows a verify already covers twenty. A "
        "batch that waits for its slowest row at every round loses more (the table's column of the waiting batch).",
        run=False,
    ),
    Experiment(
        "batching_throughput",
        "batching",
        "Compare the throughput of plain decoding at B = 16 with speculative decoding at B = 1: which serves more "
        "tokens per second?",
        BATCHING_SHOWN,
        "Read the throughput chart's two ends.",
        "Both spend the same spare compute: a forward over a few tokens costs about what one token costs. A batch "
        "fills it with tokens that are all kept, speculation with guesses that may be thrown away. A loaded "
        "server gets more from the batch, which is why serving engines lower γ as the batch grows; speculation "
        "is for the latency of a lightly loaded one.",
        run=False,
    ),
    Experiment(
        "batching_knee",
        "batching",
        "Where does T(n), the target's forward over n tokens, stop being flat?",
        BATCHING_SHOWN,
        "Read T(n)'s chart: where it leaves the flat line.",
        "Below the knee a forward is memory-bound: its time goes into reading the weights once, and a few more "
        "tokens ride along almost free. Past it the arithmetic dominates and the cost grows with n, so every "
        "drafted token that is rejected costs real time.",
        run=False,
    ),
)

LEARNING_RECORDED = (  # the sidebar settings the shipped recordings in assets/learning/ were made with
    ("gamma", 6),
    ("schedule", "auto"),
    ("gamma_max", 16),
    ("draft_confidence", 0.7),
    ("temperature", 0.0),
    ("lookahead", 8),
    ("alternatives", 2),
    ("max_new_tokens", 32),
)

LEARNING = (
    Experiment(
        "learning_traffic_learns",
        "learning",
        "Does the traffic drafter learn? Compare its draft tokens accepted per round over the first 5 requests of the "
        "recorded stream with the last 5.",
        (),  # the recorded stream above answers it: nothing to set
        "Compare the traffic drafter's line at the start of the recorded stream with its end.",
        "It has no weights to train: what it learns is the store. Each finished request adds its text, so a later "
        "request built from the same template finds a long earlier match, and its guesses are copies of text "
        "that is about to recur (free ones: no draft forward). The draft model never changes; its numbers move "
        "with the prompts alone.",
        run=False,
    ),
    Experiment(
        "learning_drift",
        "learning",
        "What happens to the traffic drafter when the stream switches from Python to JavaScript (request 17), "
        "and how fast does it recover?",
        (),  # the recorded stream above answers it: nothing to set
        "Find the switch on the chart, and the traffic drafter's line after it.",
        "Its store held Python only: a JavaScript request matches short, generic pieces of it, and what followed "
        "them in Python is wrong. Each JavaScript request that finishes joins the store, and a later one from the "
        "same template finds long matches again: it recovers without retraining, template by template (the first "
        "JavaScript request of each template starts cold). A request whose answer differs from its template's "
        "earlier ones still pays for the wrong guesses. The draft model was trained on both languages, so the "
        "switch barely moves it.",
        run=False,
    ),
    Experiment(
        "learning_bench",
        "learning",
        "On prompts that share nothing, which source does the controller pick, and what does a wrong pick cost?",
        (("learning.what", "mine"), ("learning.request", TRANSLATION)),  # this page's form only
        "The recorded bench answers it; run this prompt yourself to see one request's choice.",
        "Each round the controller takes the source expected to commit the most tokens per second, from each "
        "one's measured acceptance (traffic's by match length) and measured costs, and the draft model is the "
        "floor: a traffic option counts its first token's rate at a lower confidence bound, so a kind of match "
        "must have held more than once before a short one may outbid the model. Where the prompts share nothing the "
        "matches are short and seldom right, so it drafts with the model: the same rounds, the same work, and "
        "the same speed up to the timing noise of short requests (the draft model's own repeated runs of one "
        "prompt differ by about a tenth here).",
        run=False,
    ),
    Experiment("learning_side_channel", "learning", side.QUESTION, side.settings(CODE), side.OBSERVE, side.REASON),
)

EXPERIMENTS: tuple[Experiment, ...] = STEP + RACE + THEORY + LAB + LOSSLESS + HEADS + BATCHING + LEARNING
PATH: tuple[str, ...] = (
    "prose_defaults",
    "temperature",
    "identical",
    "rename_auto",
    "gamma8_threshold",
    "lab_ngram",
    "broken",
    "heads_medusa_eagle",
    "batching_break_even",
    "learning_drift",
)  # the ten-minute path through the app, in order


def for_page(page: str) -> tuple[Experiment, ...]:
    return tuple(e for e in EXPERIMENTS if e.page == page)


def by_id(experiment_id: str) -> Experiment:
    return next(e for e in EXPERIMENTS if e.id == experiment_id)
