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

// BROADCAST32 declares name, 32 bytes of the 8-byte value v over and
// over; LANES32, 16 bytes (lo, then hi) in both of AVX2's lanes, as
// VPSHUFB's tables must be.
#define BROADCAST32(name, v) \
	DATA name+0(SB)/8, v \
	DATA name+8(SB)/8, v \
	DATA name+16(SB)/8, v \
	DATA name+24(SB)/8, v \
	GLOBL name(SB), RODATA|NOPTR, $32
#define LANES32(name, lo, hi) \
	DATA name+0(SB)/8, lo \
	DATA name+8(SB)/8, hi \
	DATA name+16(SB)/8, lo \
	DATA name+24(SB)/8, hi \
	GLOBL name(SB), RODATA|NOPTR, $32

// The same bytes 32 times over, for AVX2.
BROADCAST32(quotes32<>, $0x2222222222222222)
BROADCAST32(backslashes32<>, $0x5c5c5c5c5c5c5c5c)
BROADCAST32(controls32<>, $0x1f1f1f1f1f1f1f1f)

// JOIN sets R to the 64-bit mask of the high bits of the bytes of YLO
// (the low 32) and YHI (the high 32).
#define JOIN(YLO, YHI, R) \
	VPMOVMSKB YLO, R \
	VPMOVMSKB YHI, DI \
	SHLQ      $32, DI \
	ORQ       DI, R

// func stringMasks64(s *[64]byte) (quotes, backslashes, controls uint64)
TEXT ·stringMasks64(SB), NOSPLIT, $0-32
	MOVQ      s+0(FP), SI
	VMOVDQU   (SI), Y0
	VMOVDQU   32(SI), Y1
	VMOVDQU   quotes32<>(SB), Y4
	VPCMPEQB  Y4, Y0, Y2
	VPCMPEQB  Y4, Y1, Y3
	JOIN(Y2, Y3, AX)
	MOVQ      AX, quotes+8(FP)
	VMOVDQU   backslashes32<>(SB), Y4
	VPCMPEQB  Y4, Y0, Y2
	VPCMPEQB  Y4, Y1, Y3
	JOIN(Y2, Y3, AX)
	MOVQ      AX, backslashes+16(FP)
	VMOVDQU   controls32<>(SB), Y4
	VPMINUB   Y4, Y0, Y2
	VPCMPEQB  Y2, Y0, Y2
	VPMINUB   Y4, Y1, Y3
	VPCMPEQB  Y3, Y1, Y3
	JOIN(Y2, Y3, AX)
	MOVQ      AX, controls+24(FP)
	VZEROUPPER
	RET

// Tables for VPSHUFB, the same 16 bytes in both lanes. A byte is in a set
// when the entry of its high nibble and the entry of its low nibble share
// a bit. One-byte escapes (" \ / b f n r t): high nibbles 2, 5, 6, 7 are
// bits 1, 2, 4, 8. Hexadecimal digits: high nibble 3 is bit 1, 4 and 6
// (the letters' rows) bit 2.
BROADCAST32(nibbles<>, $0x0f0f0f0f0f0f0f0f)
// low nibble: 2 -> 1|4|8 (" b r), 4 -> 8 (t), 6 -> 4 (f), C -> 2 (\), E -> 4 (n), F -> 1 (/)
LANES32(simpleLo<>, $0x00040008000d0000, $0x0104000200000000)
// high nibble: 2 -> 1, 5 -> 2, 6 -> 4, 7 -> 8
LANES32(simpleHi<>, $0x0804020000010000, $0x0000000000000000)
// low nibble: 0 -> 1, 1..6 -> 3, 7..9 -> 1
LANES32(hexLo<>, $0x0103030303030301, $0x0000000000000101)
// high nibble: 3 -> 1, 4 -> 2, 6 -> 2
LANES32(hexHi<>, $0x0002000201000000, $0x0000000000000000)
BROADCAST32(letterU<>, $0x7575757575757575)
BROADCAST32(letterD<>, $0x6464646464646464)
BROADCAST32(lower<>, $0x2020202020202020)
BROADCAST32(zero32<>, $0)

// CLASS sets YOUT to 0xff for each byte of Y0/Y1's whose nibbles' entries
// in the tables TLO and THI share a bit (Y4, Y5: the low and high
// nibbles of Y0; Y6, Y7: Y1's), through Y2, Y3.
#define CLASS(TLO, THI, OUTLO, OUTHI) \
	VMOVDQU  TLO, Y2 \
	VMOVDQU  THI, Y3 \
	VPSHUFB  Y4, Y2, OUTLO \
	VPSHUFB  Y5, Y3, Y12 \
	VPAND    Y12, OUTLO, OUTLO \
	VPCMPEQB zero32<>(SB), OUTLO, OUTLO \
	VPSHUFB  Y6, Y2, OUTHI \
	VPSHUFB  Y7, Y3, Y12 \
	VPAND    Y12, OUTHI, OUTHI \
	VPCMPEQB zero32<>(SB), OUTHI, OUTHI

// func skipPlain(s []byte, carry uint64) (n int, next uint64)
//
// Every register but R14 and R15, and Y0 to Y14.
TEXT ·skipPlain(SB), NOSPLIT, $0-48
	MOVQ    s_base+0(FP), SI
	MOVQ    s_len+8(FP), CX
	MOVQ    carry+24(FP), DX
	XORQ    AX, AX
	VMOVDQU quotes32<>(SB), Y8
	VMOVDQU backslashes32<>(SB), Y9
	VMOVDQU controls32<>(SB), Y10
	VMOVDQU nibbles<>(SB), Y11
	MOVQ    $0xAAAAAAAAAAAAAAAA, R12

block:
	MOVQ     CX, BX
	SUBQ     AX, BX
	CMPQ     BX, $64
	JLT      done
	VMOVDQU  (SI)(AX*1), Y0
	VMOVDQU  32(SI)(AX*1), Y1

	// A control character: not plain.
	VPMINUB  Y10, Y0, Y2
	VPCMPEQB Y2, Y0, Y2
	VPMINUB  Y10, Y1, Y3
	VPCMPEQB Y3, Y1, Y3
	VPOR     Y2, Y3, Y2
	VPTEST   Y2, Y2
	JNZ      done

	// BX: backslashes; R9: quotes.
	VPCMPEQB Y9, Y0, Y2
	VPCMPEQB Y9, Y1, Y3
	JOIN(Y2, Y3, BX)
	VPCMPEQB Y8, Y0, Y2
	VPCMPEQB Y8, Y1, Y3
	JOIN(Y2, Y3, R9)

	// R13: the escaped bytes; R11: the carry for the next block (see
	// escaped in stringend.go, the same operations).
	MOVQ     DX, R10
	NOTQ     R10
	ANDQ     BX, R10 // potential = backslashes &^ carry
	MOVQ     R10, R11
	SHLQ     $1, R11
	ORQ      R12, R11
	SUBQ     R10, R11
	XORQ     R12, R11 // codes
	MOVQ     BX, R13
	ORQ      DX, R13
	XORQ     R11, R13 // esc = codes ^ (backslashes | carry)
	ANDQ     BX, R11
	SHRQ     $63, R11 // next = codes & backslashes >> 63

	// A quote not escaped ends the string: not plain.
	MOVQ     R13, R10
	NOTQ     R10
	TESTQ    R9, R10
	JNZ      done
	TESTQ    R13, R13
	JZ       plain

	// The escapes: their nibbles, then the one-byte escapes (R9), the
	// u's (R10), the hexadecimal digits (R8), the d's (BX).
	VPAND    Y11, Y0, Y4
	VPSRLW   $4, Y0, Y5
	VPAND    Y11, Y5, Y5
	VPAND    Y11, Y1, Y6
	VPSRLW   $4, Y1, Y7
	VPAND    Y11, Y7, Y7
	CLASS(simpleLo<>(SB), simpleHi<>(SB), Y13, Y14)
	JOIN(Y13, Y14, R9)
	NOTQ     R9 // CLASS marks the bytes outside the set
	VPCMPEQB letterU<>(SB), Y0, Y13
	VPCMPEQB letterU<>(SB), Y1, Y14
	JOIN(Y13, Y14, R10)
	ORQ      R10, R9
	MOVQ     R9, BX
	NOTQ     BX
	TESTQ    R13, BX // an escaped byte of no escape: not plain
	JNZ      done
	ANDQ     R13, R10 // the escaped u's
	JZ       plain
	MOVQ     R10, BX
	SHRQ     $60, BX // a u whose digits run past the block: not plain
	JNZ      done
	CLASS(hexLo<>(SB), hexHi<>(SB), Y13, Y14)
	JOIN(Y13, Y14, R8) // R8: the bytes that are not hexadecimal digits
	MOVQ     R10, BX
	SHLQ     $1, BX
	MOVQ     BX, R9 // the first digits
	SHLQ     $1, BX
	ORQ      BX, R9
	SHLQ     $1, BX
	ORQ      BX, R9
	SHLQ     $1, BX
	ORQ      BX, R9 // all four digits
	TESTQ    R9, R8
	JNZ      done
	VPOR     lower<>(SB), Y0, Y13
	VPCMPEQB letterD<>(SB), Y13, Y13
	VPOR     lower<>(SB), Y1, Y14
	VPCMPEQB letterD<>(SB), Y14, Y14
	JOIN(Y13, Y14, BX)
	SHLQ     $1, R10
	TESTQ    R10, BX // a surrogate's escape, left to the pairing check
	JNZ      done

plain:
	MOVQ     R11, DX
	ADDQ     $64, AX
	JMP      block

done:
	VZEROUPPER
	MOVQ     AX, n+32(FP)
	MOVQ     DX, next+40(FP)
	RET
