package batch

import (
	"strconv"
	"time"
)

// The objects as OpenAI's SDKs type them (openai-go's FileObject and
// Batch): every timestamp present, null when unset.

type fileObject struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Bytes         int64   `json:"bytes"`
	CreatedAt     int64   `json:"created_at"`
	ExpiresAt     *int64  `json:"expires_at"`
	Filename      string  `json:"filename"`
	Purpose       string  `json:"purpose"`
	Status        string  `json:"status"`
	StatusDetails *string `json:"status_details"`
	// Owner is shown to the operator only.
	Owner *Owner `json:"owner,omitempty"`
}

func (c *call) file(f File) fileObject {
	o := fileObject{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.CreatedAt.Unix(),
		ExpiresAt: unix(f.ExpiresAt), Filename: f.Filename, Purpose: f.Purpose, Status: "processed"}
	if c.admin {
		o.Owner = &f.Owner
	}
	return o
}

type batchObject struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Model            string            `json:"model,omitempty"`
	Errors           *batchErrors      `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           Status            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    Counts            `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
	Owner            *Owner            `json:"owner,omitempty"`
}

type batchErrors struct {
	Object string       `json:"object"`
	Data   []batchError `json:"data"`
}

// batchError is a LineError with OpenAI's nulls for no param or line.
type batchError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

func (c *call) batch(b Batch) batchObject {
	o := batchObject{ID: b.ID, Object: "batch", Endpoint: b.Endpoint, Model: b.Model,
		InputFileID: b.InputFileID, CompletionWindow: windowText(b.CompletionWindow), Status: b.Status,
		OutputFileID: nullable(b.OutputFileID), ErrorFileID: nullable(b.ErrorFileID),
		CreatedAt: b.CreatedAt.Unix(), InProgressAt: unix(b.InProgressAt), ExpiresAt: unix(b.ExpiresAt),
		FinalizingAt: unix(b.FinalizingAt), CompletedAt: unix(b.CompletedAt), FailedAt: unix(b.FailedAt),
		ExpiredAt: unix(b.ExpiredAt), CancellingAt: unix(b.CancellingAt), CancelledAt: unix(b.CancelledAt),
		RequestCounts: b.Counts, Metadata: b.Metadata}
	if len(b.Errors) > 0 {
		o.Errors = &batchErrors{Object: "list", Data: make([]batchError, len(b.Errors))}
		for i, e := range b.Errors {
			be := batchError{Code: e.Code, Message: e.Message, Param: nullable(e.Param)}
			if e.Line > 0 {
				line := e.Line
				be.Line = &line
			}
			o.Errors.Data[i] = be
		}
	}
	if c.admin {
		o.Owner = &b.Owner
	}
	return o
}

// list is OpenAI's cursor page.
type list[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

func newList[T any](data []T, id func(T) string, more bool) list[T] {
	l := list[T]{Object: "list", Data: data, HasMore: more}
	if l.Data == nil {
		l.Data = []T{}
	}
	if len(data) > 0 {
		l.FirstID, l.LastID = nullable(id(data[0])), nullable(id(data[len(data)-1]))
	}
	return l
}

func unix(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	s := t.Unix()
	return &s
}

// windowText writes a completion window as OpenAI does: "24h".
func windowText(d time.Duration) string {
	if d > 0 && d%time.Hour == 0 {
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	}
	return d.String()
}
