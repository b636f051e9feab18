"""XML that a safe reader refuses (tests of mt.l10n and the formats it reads): a billion
laughs, and an external entity that would read /etc/passwd."""

BOMB = (b'<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
        + b"".join(b' <!ENTITY lol%d "%s">\n' % (i, b"".join(
            b"&lol%s;" % (str(i - 1).encode() if i > 1 else b"") for _ in range(10)))
                   for i in range(1, 10))
        + b']>\n<xliff version="1.2"><file><body><trans-unit id="1"><source>&lol9;</source>'
          b"</trans-unit></body></file></xliff>\n")
EXTERNAL = (b'<?xml version="1.0"?>\n<!DOCTYPE xliff [\n<!ENTITY x SYSTEM "file:///etc/passwd">\n'
            b']>\n<xliff version="1.2"><file><body><trans-unit id="1"><source>&x;</source>'
            b"</trans-unit></body></file></xliff>\n")
