//! How the agent's follow-up requests read where a model (the scripted one
//! above all) must recognise them: the request for an explanation ends with
//! [`EXPLAIN_REQUEST`], the request to explain again without invented
//! figures starts with [`REGROUNDING_OPEN`]. The agent writes them
//! (`agent::prompt`); they live here, below both, so that the model layer
//! never reaches up into the agent.

/// Sent with the last program's result, asking for the explanation. The
/// explanation continues the conversation the program was written in (the
/// same system prompt, the same messages), so that a model that keeps its
/// state for a prefix reads only the result; the rules of a good
/// explanation therefore travel here, not in a system prompt of their own.
pub const EXPLAIN_REQUEST: &str = "Now answer my question in words, in at most three short \
sentences: first the answer itself, with the numbers and words of the output above, each \
number with the name or label the output prints beside it, as a person writes them: long \
decimals rounded to two places with thousands separators (13,406.38 for 13406.384516), small \
values such as 0.000123 and years as printed (in the form my question asked for, if it asked \
for one; never a number the output does not show, never recount or recompute it yourself), \
then how the program got it. Do not write code.";

/// How a request to explain again without invented figures starts.
pub const REGROUNDING_OPEN: &str = "Your answer names ";
