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

// ESCAPED sets R13 to the escaped bytes of a block whose backslashes
// are BX, and R11 to the carry for the next block, given the carry DX and
// 0xAAAAAAAAAAAAAAAA in R12 (see escaped in stringend.go, the same
// operations). R10 is clobbered.
#define ESCAPED \
	MOVQ DX, R10 \
	NOTQ R10 \
	ANDQ BX, R10 \
	MOVQ R10, R11 \
	SHLQ $1, R11 \
	ORQ  R12, R11 \
	SUBQ R10, R11 \
	XORQ R12, R11 \
	MOVQ BX, R13 \
	ORQ  DX, R13 \
	XORQ R11, R13 \
	ANDQ BX, R11 \
	SHRQ $63, R11

// DIGITS sets R9 to the four bytes after each escaped u of R10, through
// BX.
#define DIGITS \
	MOVQ R10, BX \
	SHLQ $1, BX \
	MOVQ BX, R9 \
	SHLQ $1, BX \
	ORQ  BX, R9 \
	SHLQ $1, BX \
	ORQ  BX, R9 \
	SHLQ $1, BX \
	ORQ  BX, R9

// FULL_BLOCK jumps to done unless 64 bytes are left from AX.
#define FULL_BLOCK(done) \
	MOVQ CX, BX \
	SUBQ AX, BX \
	CMPQ BX, $64 \
	JLT  done

// func skipPlain256(s []byte, carry uint64) (n int, next uint64)
//
// Every register but R14 and R15, and Y0 to Y14.
TEXT ·skipPlain256(SB), NOSPLIT, $0-48
	MOVQ    s_base+0(FP), SI
	MOVQ    s_len+8(FP), CX
	MOVQ    carry+24(FP), DX
	XORQ    AX, AX
	MOVQ    $0xAAAAAAAAAAAAAAAA, R12
	VMOVDQU quotes32<>(SB), Y8
	VMOVDQU backslashes32<>(SB), Y9
	VMOVDQU controls32<>(SB), Y10
	VMOVDQU nibbles<>(SB), Y11

block:
	FULL_BLOCK(done)
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

	ESCAPED

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
	DIGITS
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

// The same bytes 64 times over, and VPSHUFB's tables in all four lanes,
// for AVX-512.
#define BROADCAST64(name, v) \
	DATA name+0(SB)/8, v \
	DATA name+8(SB)/8, v \
	DATA name+16(SB)/8, v \
	DATA name+24(SB)/8, v \
	DATA name+32(SB)/8, v \
	DATA name+40(SB)/8, v \
	DATA name+48(SB)/8, v \
	DATA name+56(SB)/8, v \
	GLOBL name(SB), RODATA|NOPTR, $64
#define LANES64(name, lo, hi) \
	DATA name+0(SB)/8, lo \
	DATA name+8(SB)/8, hi \
	DATA name+16(SB)/8, lo \
	DATA name+24(SB)/8, hi \
	DATA name+32(SB)/8, lo \
	DATA name+40(SB)/8, hi \
	DATA name+48(SB)/8, lo \
	DATA name+56(SB)/8, hi \
	GLOBL name(SB), RODATA|NOPTR, $64

BROADCAST64(quotes64<>, $0x2222222222222222)
BROADCAST64(backslashes64<>, $0x5c5c5c5c5c5c5c5c)
BROADCAST64(controls64<>, $0x1f1f1f1f1f1f1f1f)
BROADCAST64(nibbles64<>, $0x0f0f0f0f0f0f0f0f)
BROADCAST64(letterU64<>, $0x7575757575757575)
BROADCAST64(letterD64<>, $0x6464646464646464)
BROADCAST64(lower64<>, $0x2020202020202020)
LANES64(simpleLo64<>, $0x00040008000d0000, $0x0104000200000000)
LANES64(simpleHi64<>, $0x0804020000010000, $0x0000000000000000)
LANES64(hexLo64<>, $0x0103030303030301, $0x0000000000000101)
LANES64(hexHi64<>, $0x0002000201000000, $0x0000000000000000)

// func skipPlain512(s []byte, carry uint64) (n int, next uint64)
//
// skipPlain with AVX-512 (F and BW; it runs where wideFeatures are): a
// block is one register, and each comparison gives its 64-bit mask at
// once, where AVX2 compares two halves and joins their masks. The scalar part, the escapes' carry and
// the \u's digits, is skipPlain's, on the same registers.
//
// Every register but R14 and R15, Z0 to Z14 and K1 to K2.
TEXT ·skipPlain512(SB), NOSPLIT, $0-48
	MOVQ      s_base+0(FP), SI
	MOVQ      s_len+8(FP), CX
	MOVQ      carry+24(FP), DX
	XORQ      AX, AX
	MOVQ      $0xAAAAAAAAAAAAAAAA, R12
	VMOVDQU64 quotes64<>(SB), Z8
	VMOVDQU64 backslashes64<>(SB), Z9
	VMOVDQU64 controls64<>(SB), Z10
	VMOVDQU64 nibbles64<>(SB), Z11

block512:
	FULL_BLOCK(done512)
	VMOVDQU64 (SI)(AX*1), Z0

	// A control character (a byte <= 0x1f, unsigned): not plain.
	VPCMPUB   $2, Z10, Z0, K1
	KORTESTQ  K1, K1
	JNZ       done512

	// BX: backslashes; R9: quotes.
	VPCMPEQB  Z9, Z0, K1
	KMOVQ     K1, BX
	VPCMPEQB  Z8, Z0, K2
	KMOVQ     K2, R9

	ESCAPED

	// A quote not escaped ends the string: not plain.
	MOVQ      R13, R10
	NOTQ      R10
	TESTQ     R9, R10
	JNZ       done512
	TESTQ     R13, R13
	JZ        plain512

	// The escapes: Z4 the low nibbles, Z5 the high ones; a byte is in a
	// set when its two entries share a bit (VPTESTMB). R9: the one-byte
	// escapes and the u's; R10: the u's.
	VPANDQ    Z11, Z0, Z4
	VPSRLW    $4, Z0, Z5
	VPANDQ    Z11, Z5, Z5
	VMOVDQU64 simpleLo64<>(SB), Z2
	VMOVDQU64 simpleHi64<>(SB), Z3
	VPSHUFB   Z4, Z2, Z12
	VPSHUFB   Z5, Z3, Z13
	VPTESTMB  Z13, Z12, K1
	KMOVQ     K1, R9
	VPCMPEQB  letterU64<>(SB), Z0, K2
	KMOVQ     K2, R10
	ORQ       R10, R9
	MOVQ      R9, BX
	NOTQ      BX
	TESTQ     R13, BX // an escaped byte of no escape: not plain
	JNZ       done512
	ANDQ      R13, R10 // the escaped u's
	JZ        plain512
	MOVQ      R10, BX
	SHRQ      $60, BX // a u whose digits run past the block: not plain
	JNZ       done512
	VMOVDQU64 hexLo64<>(SB), Z2
	VMOVDQU64 hexHi64<>(SB), Z3
	VPSHUFB   Z4, Z2, Z12
	VPSHUFB   Z5, Z3, Z13
	VPTESTNMB Z13, Z12, K1
	KMOVQ     K1, R8 // the bytes that are not hexadecimal digits
	DIGITS
	TESTQ     R9, R8
	JNZ       done512
	VPORQ     lower64<>(SB), Z0, Z13
	VPCMPEQB  letterD64<>(SB), Z13, K2
	KMOVQ     K2, BX
	SHLQ      $1, R10
	TESTQ     R10, BX // a surrogate's escape, left to the pairing check
	JNZ       done512

plain512:
	MOVQ      R11, DX
	ADDQ      $64, AX
	JMP       block512

done512:
	VZEROUPPER
	MOVQ      AX, n+32(FP)
	MOVQ      DX, next+40(FP)
	RET
