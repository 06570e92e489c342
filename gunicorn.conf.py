"""gunicorn reads ./gunicorn.conf.py by default (the image's CMD runs in /app, this file's folder).

The access log keeps method, path, protocol, status, size and time, and nothing else: gunicorn's default
format has the full request line (an admin search's ?q=<patient name>), the client address, the
referrer (another page's query string) and the user agent (unsay_site/logs.py says why none of these
is logged; tests/test_serving.py reads the access log of a real gunicorn).
"""

access_log_format = '"%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms'
