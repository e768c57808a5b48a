"""The paper's Table 1 (Li et al. 2023, "Instruction-following Evaluation through Verbalizer
Manipulation", arXiv 2307.10558): nine datasets with their golden label names, and the twelve
verbalizers (mappings) in three groups. Plain data, read by the seeding migration.
"""

from __future__ import annotations

# (name, family, positive golden name, negative golden name, description)
DATASETS = (
    ("SST-2", "sentiment", "positive", "negative", "Movie review sentiment (GLUE)"),
    ("FP", "sentiment", "positive", "negative", "Financial phrase sentiment, sentences_allagree"),
    ("EMOTION", "sentiment", "joy", "sadness", "Twitter message emotion, split subset"),
    ("SNLI", "entailment", "entailment", "contradiction", "Stanford natural language inference"),
    ("SICK", "entailment", "entailment", "contradiction", "Sentence pair entailment"),
    ("RTE", "entailment", "entailment", "not entailment", "Textual entailment (GLUE)"),
    ("QQP", "paraphrase", "duplicate", "not duplicate", "Quora question pairs (GLUE)"),
    ("MRPC", "paraphrase", "equivalent", "not equivalent", "Paraphrase identification (GLUE)"),
    ("SUBJ", "subjectivity", "subjective", "objective", "Subjective/objective movie text"),
)

# (name, group, kind, positive word, negative word); names are what reports call them.
MAPPINGS = (
    ("golden", "natural", "golden", "", ""),
    ("1|0", "natural", "literal", "1", "0"),
    ("yes|no", "natural", "literal", "yes", "no"),
    ("foo|bar", "neutral", "literal", "foo", "bar"),
    ("bar|foo", "neutral", "literal", "bar", "foo"),
    ("sfo|lax", "neutral", "literal", "sfo", "lax"),
    ("lax|sfo", "neutral", "literal", "lax", "sfo"),
    ("lake|river", "neutral", "literal", "lake", "river"),
    ("river|lake", "neutral", "literal", "river", "lake"),
    ("flipped-golden", "unnatural", "flipped-golden", "", ""),
    ("0|1", "unnatural", "literal", "0", "1"),
    ("no|yes", "unnatural", "literal", "no", "yes"),
)
