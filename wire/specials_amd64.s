//go:build !purego

#include "textflag.h"

// The bytes each comparison is made against, sixteen times over.
DATA quotes<>+0(SB)/8, $0x2222222222222222
DATA quotes<>+8(SB)/8, $0x2222222222222222
GLOBL quotes<>(SB), RODATA|NOPTR, $16
DATA backslashes<>+0(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA backslashes<>+8(SB)/8, $0x5c5c5c5c5c5c5c5c
GLOBL backslashes<>(SB), RODATA|NOPTR, $16
DATA controls<>+0(SB)/8, $0x1f1f1f1f1f1f1f1f
DATA controls<>+8(SB)/8, $0x1f1f1f1f1f1f1f1f
GLOBL controls<>(SB), RODATA|NOPTR, $16

// SPECIALS16 sets in R the 16-bit mask of the special bytes of the 16 at
// off(SI): a quote, a backslash, a byte up to 0x1f (min(x, 0x1f) == x),
// a byte from 0x80 (its own high bit).
#define SPECIALS16(off, R) \
	MOVOU   off(SI), X0 \
	MOVOU   X0, X1 \
	PCMPEQB X8, X1 \
	MOVOU   X0, X2 \
	PCMPEQB X9, X2 \
	POR     X2, X1 \
	MOVOU   X0, X3 \
	PMINUB  X10, X3 \
	PCMPEQB X0, X3 \
	POR     X3, X1 \
	POR     X0, X1 \
	PMOVMSKB X1, R

// func specials64(s []byte) uint64
TEXT ·specials64(SB), NOSPLIT, $0-32
	MOVQ    s_base+0(FP), SI
	MOVOU   quotes<>(SB), X8
	MOVOU   backslashes<>(SB), X9
	MOVOU   controls<>(SB), X10
	SPECIALS16(0, AX)
	SPECIALS16(16, BX)
	SPECIALS16(32, CX)
	SPECIALS16(48, DX)
	SHLQ    $16, BX
	ORQ     BX, AX
	SHLQ    $32, CX
	ORQ     CX, AX
	SHLQ    $48, DX
	ORQ     DX, AX
	MOVQ    AX, ret+24(FP)
	RET
