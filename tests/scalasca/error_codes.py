"""Fill the package-specific error codes into a header generated from ErrorCodes.tmpl.h, and
write the matching declarations list, from a *.errors file (lines: error_code NAME "text").
Usage: error_codes.py ERRORS HEADER DECLS PREFIX"""
import re, sys
errors, header, decls, prefix = sys.argv[1:5]
codes = []
for line in open(errors):
    m = re.match(r'\s*error_code\s+(\w+)\s+"(.*)"', line)
    if m:
        codes.append(m.groups())
body = "\n".join(f"    /** {d} */\n    {prefix}_ERROR_{c}," for c, d in codes)
text = open(header).read().replace("@PACKAGE_SPECIFIC_ERROR_CODES@", body.strip())
open(header, "w").write(text)
open(decls, "w").write("".join(f'    _e( {c}, "{d}"),\n' for c, d in codes))
