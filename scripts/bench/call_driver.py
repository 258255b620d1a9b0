"""N tools/call echo calls to the proxy's /mcp/echo, one at a time, on one connection:
legacy (an initialize, then the session) or modern (stateless POSTs carrying _meta).
Usage: call_driver.py http://127.0.0.1:PORT legacy|modern N"""
import http.client, json, sys
from urllib.parse import urlparse
base, era, n = urlparse(sys.argv[1]), sys.argv[2], int(sys.argv[3])
c = http.client.HTTPConnection(base.hostname, base.port)
META = {"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"drive","version":"0.1.0"}}
def post(body, headers):
    h = {"Content-Type":"application/json","Accept":"application/json, text/event-stream"}
    h.update(headers)
    c.request("POST", "/mcp/echo", json.dumps(body), h)
    r = c.getresponse(); data = r.read()
    return r, data
if era == "legacy":
    r, d = post({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"drive","version":"0"}}}, {})
    sid = r.getheader("mcp-session-id")
    hv = {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
    post({"jsonrpc":"2.0","method":"notifications/initialized"}, hv)
    for i in range(n):
        r, d = post({"jsonrpc":"2.0","id":i+1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}, hv)
        assert r.status == 200, d
else:
    for i in range(n):
        r, d = post({"jsonrpc":"2.0","id":i+1,"method":"tools/call","params":{"_meta":META,"name":"echo","arguments":{"text":"hi"}}},
                    {"mcp-protocol-version":"2026-07-28","mcp-method":"tools/call","mcp-name":"echo"})
        assert r.status == 200, (r.status, d)
print(era, n)
