package client

// Calls to the group coordinator. The controller coordinates every
// consumer group, and any broker forwards a group call there, so a member
// could send its heartbeats and commits anywhere. But a controller that
// stops answering (paused by SIGSTOP, a long GC, a frozen VM) keeps every
// call sent to it, or forwarded to it, waiting for the whole request
// timeout, although the cluster elects another controller in about a
// second: a member's commits then hold its Poll loop, and its heartbeats
// keep it from learning where the group went, for as long as the pause.
// So:
//
//   - every group call is bounded well below the member's session timeout
//     (groupCallTimeout; a heartbeat for the time the coordinator may hold
//     it plus that), and a heartbeat never outlasts the session it is
//     meant to keep (heartbeatLoop);
//   - a call goes to the controller that the metadata names, unless that
//     broker has left a group call of this client unanswered: then it goes
//     to another broker, which forwards it to the controller it knows;
//   - a call that gets no answer marks its broker silent, ends the other
//     group calls waiting on it, and refreshes the metadata from the other
//     brokers, so the next call goes to the new controller once it is
//     elected.
//
// A silent broker is trusted again when a group call to it is answered, or
// when metadata fetched silentTrustAfter after it went silent still names
// it the controller: the other brokers would have stopped naming a
// controller they had not heard from for that long.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// silentTrustAfter is how long after a broker went silent the metadata's
// word that it is the controller is believed again: longer than the
// metadata group takes to notice a silent leader (its heartbeat timeout,
// 500 ms by default).
const silentTrustAfter = time.Second

// minGroupCallTimeout is the least time a group call is given, however
// short the session: a commit goes through the metadata group's log.
const minGroupCallTimeout = 500 * time.Millisecond

// groupCallTimeout bounds one group call (a heartbeat: beyond the time the
// coordinator may hold it): a quarter of the session timeout, so that a
// member notices a silent coordinator, and tries another, several times
// before its session ends; at least minGroupCallTimeout and at most the
// request timeout.
func (c *Client) groupCallTimeout(session time.Duration) time.Duration {
	return min(max(session/4, minGroupCallTimeout), c.cfg.requestTimeout)
}

// silence is the record of a broker that left a group call unanswered.
type silence struct {
	since time.Time
}

// coordinatorAddr returns where to send a group call: the controller the
// metadata names, unless it is silent; else any other broker, not silent
// if one is known, which forwards the call.
func (c *Client) coordinatorAddr() string {
	s := c.meta.current()
	ctrl := s.brokers[s.controller] // "" when no controller is known (-1)
	addrs := c.brokerAddrs()
	c.mu.Lock()
	defer c.mu.Unlock()
	if ctrl != "" {
		sl, silent := c.mu.silent[ctrl]
		if !silent {
			return ctrl
		}
		if s.fetched.Sub(sl.since) >= silentTrustAfter {
			c.trustLocked(ctrl)
			return ctrl
		}
	}
	var oldest string
	for _, a := range addrs {
		sl, silent := c.mu.silent[a]
		if !silent {
			return a
		}
		if oldest == "" || sl.since.Before(c.mu.silent[oldest].since) {
			oldest = a
		}
	}
	return oldest // every broker is silent: the one silent the longest
}

// watchSilence returns a channel closed when addr is marked silent (by
// another group call) while a call waits on it.
func (c *Client) watchSilence(addr string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.listeners == nil {
		c.mu.listeners = map[string]chan struct{}{}
	}
	ch, ok := c.mu.listeners[addr]
	if !ok {
		ch = make(chan struct{})
		c.mu.listeners[addr] = ch
	}
	return ch
}

// markSilent records that addr left a group call unanswered and ends the
// other group calls waiting on it.
func (c *Client) markSilent(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.silent == nil {
		c.mu.silent = map[string]silence{}
	}
	c.mu.silent[addr] = silence{since: time.Now()}
	if ch, ok := c.mu.listeners[addr]; ok {
		close(ch)
		delete(c.mu.listeners, addr)
	}
}

// trust forgets that addr was silent: it answered.
func (c *Client) trust(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trustLocked(addr)
}

func (c *Client) trustLocked(addr string) { delete(c.mu.silent, addr) }

// errSilenced ends a group call whose broker another group call found
// silent.
var errSilenced = errors.New("another group call found the broker silent")

// noAnswer reports whether err means the call got no answer from a broker
// (it timed out, or the connection failed or broke), as opposed to an
// answer, even a refusal.
func noAnswer(err error) bool {
	e, ok := AsError(err)
	return ok && e.Reason == "" && (e.Code == codes.Unavailable || e.Code == codes.DeadlineExceeded)
}

// groupCall makes one attempt of a group call at the coordinator, for at
// most timeout, and returns the broker it went to. When the call gets no
// answer, the broker is marked silent (see the file comment); the caller
// should then refresh the metadata (findCoordinator) before it tries again.
// The error is converted (toError); a call that ran out of time, or was
// ended because its broker went silent, fails with a DeadlineExceeded
// *Error without a reason, which noAnswer recognises.
func (c *Client) groupCall(ctx context.Context, timeout time.Duration, call func(ctx context.Context, cc *grpc.ClientConn) error) (string, error) {
	addr := c.coordinatorAddr()
	if addr == "" {
		return "", newError(codes.Unavailable, "", true, "no broker address known")
	}
	cc, err := c.conn(addr)
	if err != nil {
		return addr, err
	}
	// The deadline travels with the call, so a broker that forwards it
	// gives up at the same time.
	tctx, tcancel := context.WithTimeout(ctx, timeout)
	defer tcancel()
	rctx, cancel := context.WithCancelCause(tctx)
	defer cancel(nil)
	quiet := c.watchSilence(addr)
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-quiet:
			cancel(errSilenced)
		case <-stopWatch:
		}
	}()
	start := time.Now()
	err = call(rctx, cc)
	close(stopWatch)
	<-watched
	if err == nil {
		c.trust(addr)
		return addr, nil
	}
	err = toError(err)
	if ctx.Err() != nil {
		return addr, err
	}
	if cause := context.Cause(rctx); cause != nil {
		// Ended here, not answered by the broker.
		err = newError(codes.DeadlineExceeded, "", true, "no answer from %s in %v (%v)", addr, time.Since(start).Round(time.Millisecond), cause)
		if cause == errSilenced {
			return addr, err
		}
	}
	if noAnswer(err) {
		c.markSilent(addr)
	} else {
		c.trust(addr)
	}
	return addr, err
}

// findCoordinator refreshes the metadata from the brokers other than
// silent (asked last), each for at most timeout, so that the next group
// call goes to the controller the rest of the cluster knows. Failures are
// only logged: the next call finds its way or fails on its own.
func (c *Client) findCoordinator(ctx context.Context, silent string, timeout time.Duration) {
	resp, err := c.fetchMetadataAvoiding(ctx, silent, timeout)
	if err != nil {
		c.log.Debug("strata: metadata refresh after a silent coordinator failed", "silent", silent, "err", err)
		return
	}
	c.meta.install(resp)
}

// mayHaveApplied reports whether a failed commit attempt may have been
// applied all the same: it got no answer, or an answer that does not say
// it was not (the controller lost its leadership or timed out while the
// commit was in its log). A controller that refuses a commit (an unknown
// member, a partition not owned, not the controller: with that broker's
// address) did not apply it.
func mayHaveApplied(err error) bool {
	e, ok := AsError(err)
	if !ok {
		return true // a context error: the call may have reached the broker
	}
	switch e.Reason {
	case "":
		return e.Code != codes.PermissionDenied && e.Code != codes.Unauthenticated &&
			e.Code != codes.InvalidArgument && e.Code != codes.Unimplemented
	case "TIMEOUT":
		return true
	case "UNAVAILABLE":
		return e.Metadata["controller_address"] == "" && e.Metadata["controller_id"] == ""
	}
	return false
}

// commitOutcomeUnknown is the error of a commit that may have been applied
// (an attempt got no answer, noAnswer) and was not answered with success:
// ErrCommitOutcomeUnknown, wrapping that attempt's failure and, when ctx
// ended, ctx's error, and naming the last failure. The last failure is not
// wrapped when it is a refusal: errors.Is must not take the commit for
// refused.
func commitOutcomeUnknown(ctx context.Context, unanswered, last error) error {
	msg := "strata: " + bare(ErrCommitOutcomeUnknown) + ": an attempt got no answer (" + bare(unanswered) + ")"
	errs := []error{ErrCommitOutcomeUnknown, unanswered}
	if last != nil && last != unanswered {
		msg += ", and the retry failed: " + bare(last)
	}
	if err := ctx.Err(); err != nil {
		msg += fmt.Sprintf(" (%v)", err)
		errs = append(errs, err)
	}
	return &chainError{msg: msg, errs: errs}
}
