// Package wire is the contract between executors and the server: the
// write and read API's request and reply types, the error envelope every
// route answers with, and the masking rules an executor applies to the
// frames it sends. It imports event only, so a third-party executor needs
// this package and event, and nothing of the server.
package wire
