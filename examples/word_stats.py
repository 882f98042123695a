# An example hidden function for `pau-mcp run-code`.
def test_func(arg0, arg1):
    words = [w for w in arg0.split() if len(w) >= arg1]
    if not words:
        return None
    return {"count": len(words), "longest": max(words, key=len), "upper": [w.upper() for w in words]}
