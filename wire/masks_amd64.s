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

// MARKS16 sets in X1 a byte of 0xff for each of the 16 bytes at off(SI),
// loaded into X0, that ends a run of plain string bytes: a quote, a
// backslash, a byte up to 0x1f (min(x, 0x1f) == x).
#define MARKS16(off) \
	MOVOU   off(SI), X0 \
	MOVOU   X0, X1 \
	PCMPEQB X8, X1 \
	MOVOU   X0, X2 \
	PCMPEQB X9, X2 \
	POR     X2, X1 \
	MOVOU   X0, X3 \
	PMINUB  X10, X3 \
	PCMPEQB X0, X3 \
	POR     X3, X1

// SPECIALS16 sets in R the 16-bit mask of MARKS16 that also marks a byte
// from 0x80 (its own high bit).
#define SPECIALS16(off, R) \
	MARKS16(off) \
	POR     X0, X1 \
	PMOVMSKB X1, R

// MASK64 returns the mask of s[:64] that M, a 16-byte mask, makes of its
// four quarters.
#define MASK64(M) \
	MOVQ    s_base+0(FP), SI \
	MOVOU   quotes<>(SB), X8 \
	MOVOU   backslashes<>(SB), X9 \
	MOVOU   controls<>(SB), X10 \
	M(0, AX) \
	M(16, BX) \
	M(32, CX) \
	M(48, DX) \
	SHLQ    $16, BX \
	ORQ     BX, AX \
	SHLQ    $32, CX \
	ORQ     CX, AX \
	SHLQ    $48, DX \
	ORQ     DX, AX \
	MOVQ    AX, ret+24(FP) \
	RET

// func specials64(s []byte) uint64
TEXT ·specials64(SB), NOSPLIT, $0-32
	MASK64(SPECIALS16)

// The same bytes 32 times over, for AVX2.
DATA quotes32<>+0(SB)/8, $0x2222222222222222
DATA quotes32<>+8(SB)/8, $0x2222222222222222
DATA quotes32<>+16(SB)/8, $0x2222222222222222
DATA quotes32<>+24(SB)/8, $0x2222222222222222
GLOBL quotes32<>(SB), RODATA|NOPTR, $32
DATA backslashes32<>+0(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA backslashes32<>+8(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA backslashes32<>+16(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA backslashes32<>+24(SB)/8, $0x5c5c5c5c5c5c5c5c
GLOBL backslashes32<>(SB), RODATA|NOPTR, $32
DATA controls32<>+0(SB)/8, $0x1f1f1f1f1f1f1f1f
DATA controls32<>+8(SB)/8, $0x1f1f1f1f1f1f1f1f
DATA controls32<>+16(SB)/8, $0x1f1f1f1f1f1f1f1f
DATA controls32<>+24(SB)/8, $0x1f1f1f1f1f1f1f1f
GLOBL controls32<>(SB), RODATA|NOPTR, $32

// JOIN64 sets in R the 64-bit mask of the bytes that are 0xff in Y2 (the
// low 32) and Y3 (the high 32).
#define JOIN64(R) \
	VPMOVMSKB Y2, R \
	VPMOVMSKB Y3, DX \
	SHLQ      $32, DX \
	ORQ       DX, R

// func stringMasks64(s *[64]byte) (quotes, backslashes, controls uint64)
TEXT ·stringMasks64(SB), NOSPLIT, $0-32
	MOVQ      s+0(FP), SI
	VMOVDQU   (SI), Y0
	VMOVDQU   32(SI), Y1
	VMOVDQU   quotes32<>(SB), Y4
	VPCMPEQB  Y4, Y0, Y2
	VPCMPEQB  Y4, Y1, Y3
	JOIN64(AX)
	MOVQ      AX, quotes+8(FP)
	VMOVDQU   backslashes32<>(SB), Y4
	VPCMPEQB  Y4, Y0, Y2
	VPCMPEQB  Y4, Y1, Y3
	JOIN64(AX)
	MOVQ      AX, backslashes+16(FP)
	VMOVDQU   controls32<>(SB), Y4
	VPMINUB   Y4, Y0, Y2
	VPCMPEQB  Y2, Y0, Y2
	VPMINUB   Y4, Y1, Y3
	VPCMPEQB  Y3, Y1, Y3
	JOIN64(AX)
	MOVQ      AX, controls+24(FP)
	VZEROUPPER
	RET
