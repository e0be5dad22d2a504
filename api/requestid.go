package api

// RequestIDHeader carries the gateway's request ID on every answer, and
// a client's own ID on its request (X-Request-ID). Written as net/http
// keeps it, so that it is found without building the key again, and an
// allocation, on every request.
const RequestIDHeader = "X-Request-Id"
