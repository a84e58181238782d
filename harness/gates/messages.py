"""The sentences the gate engine composes itself (``evaluate``), as catalog message ids: the
English wording with ``%(name)s`` placeholders. ``result.json`` records them with their parameters
(``Observation.reason_msgs``, ``measured_msgs``, ``CheckResult.reason_msgs``) beside the English
text, so a report composes them in its own language (the ids are extracted into
``harness/report/locale`` by ``tools/i18n_extract.py``). Words a pipeline recorded as data
(``detail``, ``text``) travel as ``TEXT``: they stay as recorded."""

from __future__ import annotations

from harness.gates.outcome import Message


def N_(message: str) -> str:  # noqa: N802 - the gettext convention for "mark, do not translate here"
    return message


TEXT = N_("%(text)s")
NOT_MEASURED = N_("not measured")
NO_VALUE = N_("no measured value")
NO_VALUE_AT = N_("no measured value at %(path)s")
POINT_MEASURED = N_("%(value)s (point estimate)")
POINT_REASON = N_("point estimate, no confidence interval")
FEW_REPETITIONS = N_("%(n)s repetition(s): an interval needs at least %(min)s per group")
FEW_SAMPLES = N_("%(n)s sample(s): an interval needs at least %(min)s per group")
FEW_REQUESTS = N_("%(n)s request(s): an interval needs at least %(min)s per group")
FEW_RUNS = N_("%(n)s run(s) a side: an interval needs at least %(min)s")
FEW_WINDOWS = N_("%(n)s window(s) a third: an interval needs at least %(min)s")
INTERVAL = N_("%(value)s [%(low)s, %(high)s] (%(confidence)s%% CI, %(size)s)")
SIZE_REPETITIONS = N_("%(n)s repetitions, %(requests)s requests")
SIZE_RUNS = N_("%(n)s runs, %(rounds)s rounds")
SIZE_BINOMIAL = N_("%(k)s of %(trials)s requests")
SIZE_BINOMIAL_GROUPS = N_("%(k)s of %(trials)s requests over %(groups)s repetitions")
SIZE_CAPACITY = N_("peak of %(candidate)s candidate / %(baseline)s baseline points, %(n)s+ repetitions each")
SIZE_N = N_("n=%(n)s")
SIZE_WINDOWS = N_("%(n)s windows a third in %(batches)s batches")
STRADDLES = N_("the %(confidence)s%% interval straddles the threshold %(threshold)s")
DECIDE_REPETITIONS = N_("about %(n)s repetitions per group would likely decide")
DECIDE_SAMPLES = N_("about %(n)s samples per group would likely decide")
DECIDE_REQUESTS = N_("about %(n)s requests would likely decide")
DECIDE_RUNS = N_("about %(n)s runs a side would likely decide")
DECIDE_WINDOWS = N_("about %(n)s windows a third would likely decide")
LONG_MEMORY = N_("the windows keep a long memory (Hurst exponent %(hurst)s, %(bound)s with its standard error), "
                 "so the interval narrows slowly with the soak's length")
ON_THRESHOLD = N_("the estimate sits on the threshold, more samples are unlikely to decide")
ALL_PASSED = N_("all %(n)s passed")
AND_MORE = N_("and %(n)s more")


def msg(message_id: str, **params: object) -> Message:
    return Message(id=message_id, params={k: v if isinstance(v, Message) else str(v) for k, v in params.items()})


def text(words: str) -> Message:
    """Words recorded as data (a pipeline's detail), carried unchanged."""
    return msg(TEXT, text=words)
