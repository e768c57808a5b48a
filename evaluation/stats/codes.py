"""Label codes shared by every statistic (int8; the database stores 0/1/2 too)."""

NO = 0
YES = 1
UNKNOWN = 2
# Padding for an annotator slot with no label: items may have different numbers of annotators.
MISSING = -1
# How many codes MISSING..UNKNOWN there are: a table indexed by code - MISSING.
N_CODES = UNKNOWN - MISSING + 1
