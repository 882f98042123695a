# An example hidden function for `pau-mcp run-code` and `pau-mcp import python` (its inputs are in
# word_stats.inputs.json beside it).
def test_func(arg0, arg1):
    """Words of the text arg0 that have at least arg1 characters.

    Returns None when no word is that long; otherwise a dict with "count" (how many such words),
    "longest" (the first of the longest) and "upper" (those words in upper case, in text order).
    """
    words = [w for w in arg0.split() if len(w) >= arg1]
    if not words:
        return None
    return {"count": len(words), "longest": max(words, key=len), "upper": [w.upper() for w in words]}
